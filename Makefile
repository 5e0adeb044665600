# The course's commands. `make lab` to learn, `make test` to check everything.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install lab test notebooks cheatsheet clean

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or run make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

## Open the course in JupyterLab (on a headless machine it prints the URL it serves).
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root)

## Install, then run every test: unit, widget, nbval over the committed notebooks, browser.
test: $(STAMP)
	bash tools/ensure_chromium.sh
	$(PY) -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly

## Re-execute every notebook in place in a fresh kernel (run after changing course_utils).
notebooks: $(STAMP)
	$(PY) tools/notebooks.py build $(NB)

## Print the cheat sheet (chapter 9): build/cheatsheet.html (standalone) and build/cheatsheet.pdf (2 A4 pages, headless Chromium).
cheatsheet: $(STAMP)
	bash tools/ensure_chromium.sh
	$(PY) -m course_utils.cheatsheet_page build/cheatsheet.html --pdf build/cheatsheet.pdf

clean:
	rm -rf $(VENV)
