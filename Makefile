# The course's commands. `make lab` to learn, `make test` to check everything.
VENV   ?= .venv
PY     := $(VENV)/bin/python

# The interpreter that builds .venv: PYTHON=/path/to/python if given, else the newest supported python3.X on PATH
# (tools/find_python.sh, which says which it chose; the supported versions are pyproject.toml's requires-python).
# Only `make clean` and `make debian13-check` do without one. The stamp names the version, so a .venv built by another Python is rebuilt.
ifneq ($(filter-out clean debian13-check,$(or $(MAKECMDGOALS),install)),)
CHOICE := $(shell PYTHON='$(PYTHON)' $(SHELL) tools/find_python.sh 2>/dev/null)
ifeq ($(CHOICE),)
$(error $(shell PYTHON='$(PYTHON)' $(SHELL) tools/find_python.sh 2>&1 >/dev/null))
endif
$(info Python: $(firstword $(CHOICE)) (Python $(lastword $(CHOICE))))
endif
BASE_PYTHON := $(firstword $(CHOICE))
PYVER  := $(lastword $(CHOICE))
STAMP  := $(VENV)/.installed-py$(PYVER)

.PHONY: install lab test nbval nbval-perturbed notebooks cheatsheet mutants debian13-check clean

# Building .venv is tools/course.py's `install`, the same command a machine without make runs (README): the lock,
# the course itself, and JupyterLab settings for this environment only (widget state saved with the notebook, the
# kernel started without a dialog, no news pop-up). A .venv built by another Python is rebuilt from nothing.
$(STAMP): requirements.lock pyproject.toml tools/jupyterlab_overrides.json tools/course.py
	$(BASE_PYTHON) tools/course.py install

install: $(STAMP)

## Open the course in JupyterLab on chapter 0 (on a headless machine it prints the URL to open).
lab: $(STAMP)
	$(PY) tools/course.py lab

## Install, then run every test: unit, widget, nbval, nbval under perturbed numerics, browser (a summary per part at the end).
test: $(STAMP)
	$(PY) tools/course.py test

## Only the notebook check an instructor's CI runs: re-execute every chapter, compare with the committed outputs.
nbval: $(STAMP)
	$(PY) tools/course.py nbval

## The notebook check under perturbed numeric kernels (another CPU's code paths); NB=05 for one chapter.
nbval-perturbed: $(STAMP)
	$(PY) tools/nbval_perturbed.py $(NB)

## Re-execute every notebook in place in a fresh kernel (run after changing course_utils).
notebooks: $(STAMP)
	$(PY) tools/notebooks.py build $(NB)

## Mutation testing of the exercises' own solutions (issue 40): every mutant must fail its exercise's check or be listed,
## with its reason, in course_utils/exercises/equivalent_mutants.py; fails on a survivor. Report: build/mutants.json.
## Not part of `make test` (about 4 minutes on 2 loaded cores); NAMES="dropout evaluate" for some exercises.
mutants: $(STAMP)
	$(PY) tools/mutate_exercises.py $(NAMES)

## Print the cheat sheet (chapter 9): build/cheatsheet.html (standalone) and build/cheatsheet.pdf (2 A4 pages, headless Chromium).
cheatsheet: $(STAMP)
	bash tools/ensure_chromium.sh
	$(PY) -m course_utils.chapters.ch09_cheatsheet_page build/cheatsheet.html --pdf build/cheatsheet.pdf

## The instructor command on another Python, not part of `make test` (it downloads gigabytes): `make nbval` in a
## Debian 13 chroot with its Python 3.13 (root, debootstrap; the chroot is kept in CHROOT=/work/chroot-trixie and reused).
debian13-check:
	bash tools/debian13_check.sh

clean:
	rm -rf $(VENV)
