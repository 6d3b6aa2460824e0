# The two commands: `make lab` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   := .venv
BIN    := $(CURDIR)/$(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export PATH := $(BIN):$(PATH)

.PHONY: setup lab test lint matrix grade bench bench-grading release student-kit clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[lab,course,dev]'
	touch $(STAMP)

setup: $(STAMP)

# Offline: the scripted Claude answers (RESUMABLE_LIVE=1 + ANTHROPIC_API_KEY for live Claude),
# and JupyterLab neither checks for updates nor fetches news.
LAB_FLAGS := --notebook-dir=$(CURDIR) --LabApp.news_url=None \
	--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	$(if $(filter 0,$(shell id -u)),--allow-root,)

lab: setup  ## open JupyterLab on the lessons
	$(BIN)/jupyter lab $(LAB_FLAGS) $(LAB_ARGS) lessons/01_skeleton_resume.ipynb

test: setup lint  ## lint, types, then every test
	$(BIN)/python -m pytest

lint: setup  ## ruff (lint and format) and mypy, as CI runs them
	$(BIN)/ruff check resumable_core tests bench
	$(BIN)/ruff format --check resumable_core tests bench
	$(BIN)/mypy

matrix: setup
	$(BIN)/python -m resumable_core matrix

grade: setup  ## make grade SUBMISSIONS=path/to/zip-or-folder ASSIGNMENT=reconcile JOBS=2
	$(BIN)/python -m resumable_core grade $(SUBMISSIONS) --assignment $(or $(ASSIGNMENT),reconcile) --jobs $(or $(JOBS),2)

release: setup  ## regenerate exercises/ from solutions/ with nbgrader
	$(BIN)/python -m resumable_core.course release

bench: setup  ## checkpoint save cost and crash-matrix benchmarks (~3 min)
	$(BIN)/python bench/bench_checkpoint.py
	$(BIN)/python bench/bench_matrix.py

bench-grading: setup  ## 60 submissions: sequential nbgrader autograde vs grade --jobs 2 (~6 min)
	$(BIN)/python bench/bench_grading.py

clean:
	rm -rf $(VENV) .pytest_cache
