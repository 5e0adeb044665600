# The course's commands. `make lab` to learn, `make test` to check everything.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install lab test nbval nbval-perturbed notebooks cheatsheet clean

# JupyterLab settings for this course's environment only: widget state saved with the notebook (a reopened
# notebook shows its views and says how to bring them back), the kernel started without a dialog, no news pop-up.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.d/training-loop-course.json

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or run make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77"
	$(PY) -m pip install --quiet -r requirements.lock
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

$(LAB_OVERRIDES): tools/jupyterlab_overrides.json $(STAMP)
	@mkdir -p $(dir $@)
	cp $< $@

install: $(STAMP) $(LAB_OVERRIDES)

## Open the course in JupyterLab on chapter 0 (on a headless machine it prints the URL to open).
lab: $(STAMP) $(LAB_OVERRIDES)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --LabApp.default_url=/lab/tree/00_vocabulary.ipynb \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root)

NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly

## Install, then run every test: unit, widget, nbval, nbval under perturbed numerics, browser (a summary per part at the end).
test: $(STAMP) $(LAB_OVERRIDES)
	bash tools/ensure_chromium.sh
	$(PY) -m pytest $(NBVAL)

## Only the notebook check an instructor's CI runs: re-execute every chapter, compare with the committed outputs.
nbval: $(STAMP)
	$(PY) -m pytest $(NBVAL) notebooks/

## The notebook check under perturbed numeric kernels (another CPU's code paths); NB=05 for one chapter.
nbval-perturbed: $(STAMP)
	$(PY) tools/nbval_perturbed.py $(NB)

## Re-execute every notebook in place in a fresh kernel (run after changing course_utils).
notebooks: $(STAMP)
	$(PY) tools/notebooks.py build $(NB)

## Print the cheat sheet (chapter 9): build/cheatsheet.html (standalone) and build/cheatsheet.pdf (2 A4 pages, headless Chromium).
cheatsheet: $(STAMP)
	bash tools/ensure_chromium.sh
	$(PY) -m course_utils.chapters.ch09_cheatsheet_page build/cheatsheet.html --pdf build/cheatsheet.pdf

clean:
	rm -rf $(VENV)
