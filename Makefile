# The two commands: `make lab` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   := .venv
BIN    := $(CURDIR)/$(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export PATH := $(BIN):$(PATH)
# `make student-kit LANG=ko` (and self-study-kit, lab): the kit's language, as RESUMABLE_LANG. LANG
# is the locale's variable and "ko" is no locale, so the commands make runs get C.UTF-8 instead.
ifeq ($(origin LANG),command line)
export RESUMABLE_LANG := $(LANG)
override LANG := C.UTF-8
export LANG
endif
KIT_LANG = $(or $(RESUMABLE_LANG),en)

.PHONY: FORCE setup lab formgrader test test-suite types test-core-pythons lint matrix grade bench bench-sandbox bench-grading release student-kit self-study-kit hub hub-remove clean

$(STAMP): pyproject.toml
	@echo "Installing JupyterLab and the kit into $(VENV): the first time, this takes a few minutes."
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[lab,course,class,dev]'
	@# jsonschema imports rfc3987-syntax (jupyter-events' extra) when present, which builds ~35 Earley parsers:
	@# 1-5 s in every process that reads a notebook. No schema we or Jupyter validate has an iri format.
	$(BIN)/python -m pip uninstall -q -y rfc3987-syntax
	touch $(STAMP)

setup: $(STAMP)

# Offline: the scripted Claude answers (RESUMABLE_LIVE=1 + ANTHROPIC_API_KEY for live Claude),
# and JupyterLab neither checks for updates nor fetches news.
LAB_FLAGS := --notebook-dir=$(CURDIR) --LabApp.news_url=None \
	--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	$(if $(filter 0,$(shell id -u)),--allow-root,)
# JupyterLab takes its settings' defaults from overrides.json in its app settings folder (`jupyter
# lab path`: the Application directory's settings/). The kit's, the same as the student kit's, say
# never to fetch news (so no "official Jupyter news?" pop-up) nor check for updates; with LANG=ko,
# the Korean kit's (lab-settings/overrides.ko.json) also pick JupyterLab's ko-KR language pack.
# Copied whenever it differs, so switching LANG switches JupyterLab's menus too.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_SETTINGS = $(firstword $(wildcard resumable_core/course/kit/lab-settings/overrides.$(KIT_LANG).json) \
	resumable_core/course/kit/lab-settings/overrides.json)

$(LAB_OVERRIDES): $(LAB_SETTINGS) FORCE | $(STAMP)
	mkdir -p $(@D)
	cmp -s $< $@ || cp $< $@

FORCE:

# The first lesson; with LANG=ko (or RESUMABLE_LANG=ko), its Korean edition once lessons/ko/ has it.
FIRST_LESSON = $(firstword $(if $(RESUMABLE_LANG),$(wildcard lessons/$(RESUMABLE_LANG)/01_skeleton_resume.ipynb)) \
	lessons/01_skeleton_resume.ipynb)

lab: setup $(LAB_OVERRIDES)  ## open JupyterLab on the lessons (LANG=ko: in Korean)
	$(BIN)/jupyter lab $(LAB_FLAGS) $(LAB_ARGS) $(FIRST_LESSON)

# nbgrader 0.9 has no `nbgrader formgrader` command: formgrader is a Jupyter server extension
# (`jupyter server extension list` shows nbgrader.server_extensions.formgrader enabled), served at
# /formgrader by any Jupyter server started in the course folder, which reads its nbgrader_config.py.
FORMGRADER_FLAGS := --ServerApp.root_dir=$(CURDIR) --ServerApp.default_url=/formgrader \
	$(if $(filter 0,$(shell id -u)),--allow-root,)

formgrader: setup  ## formgrader on this course's gradebook: open the printed link (it ends in /formgrader)
	$(BIN)/jupyter server $(FORMGRADER_FLAGS) $(FORMGRADER_ARGS)

# ruff first (seconds: a style slip fails at once); then the main suite, with mypy and the core suite
# on 3.12/3.13 beside it (-j3), not after it: the main suite waits on kernels and sandboxes, and the
# other two fill those waits. Each side job prints its output as one block when it ends.
# Every temporary file of the run goes to one fresh folder on a memory file system where there is one
# (/dev/shm; a short name: a socket's path holds 107 bytes), removed at the end. The tests kill
# processes, never the machine, so they need fsync called, not a disk under it, and on a virtual
# machine's disk fsync was most of their time (tests/test_matrix.py's random kills keep a disk).
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE=1): else every
# process the tests start compiles the kit again, and each worker rewrites every test module's asserts
# (measured: the quick suite's CPU time 45 s without it, 32 s with it). __pycache__ is in .gitignore.
TEST_TMP_ROOT := $(firstword $(wildcard /dev/shm) /tmp)

test: setup  ## ruff, then every test with mypy and the core suite on 3.12 and 3.13 beside it
	$(BIN)/ruff check resumable_core tests bench
	$(BIN)/ruff format --check resumable_core tests bench
	@tmp=$$(mktemp -d $(TEST_TMP_ROOT)/ra-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && trap 'exit 130' INT TERM && \
	echo "temporary files: $$tmp" && env TMPDIR=$$tmp PYTHONDONTWRITEBYTECODE= $(MAKE) --no-print-directory -j3 test-suite types test-core-pythons

test-suite: setup  ## every test, on two workers (the longest files first: tests/conftest.py)
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=25

# mypy's cache lives outside the checkout, so a fresh clone checks in seconds what a cold run takes
# minutes for; mypy compares each file's hash with the cache's, so a stale entry is never believed.
MYPY_CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/resumable-agents-mypy

types: setup  ## mypy, its output shown when it ends
	@MYPY_CACHE_DIR=$(MYPY_CACHE_DIR) $(BIN)/mypy >$(VENV)/mypy.log 2>&1; code=$$?; cat $(VENV)/mypy.log; exit $$code

# The core wing's tests, which need only `pip install .` plus pytest and hypothesis.
CORE_PYTHONS := 3.12 3.13
CORE_TESTS := $(addprefix tests/test_,architecture.py checkpoint.py checkpoint_os.py claude.py crash.py \
	lease.py ledger.py loop.py protocol.py strategies.py tools.py)

test-core-pythons:  ## the core suite (-m "not extras": slow tests too) on each of CORE_PYTHONS, in .venv-3.x; its output shown when it ends
	@{ for v in $(CORE_PYTHONS); do \
	  py=$$(python$$v -c 'import sys; print(sys.executable)' 2>/dev/null \
	    || ls -d "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/$$v*/bin/python$$v 2>/dev/null | tail -n 1); \
	  if [ -z "$$py" ]; then echo "test-core-pythons: no python$$v on this machine, skipped"; continue; fi; \
	  if [ ! .venv-$$v/.installed-stamp -nt pyproject.toml ]; then \
	    $$py -m venv .venv-$$v && .venv-$$v/bin/python -m pip install -q --upgrade pip \
	    && .venv-$$v/bin/python -m pip install -q -e . 'pytest>=8,<10' 'hypothesis>=6.100,<7' \
	      >.venv-$$v/install.log 2>&1 && touch .venv-$$v/.installed-stamp \
	    || { cat .venv-$$v/install.log; exit 1; }; \
	  fi; \
	  echo "== core tests on $$(.venv-$$v/bin/python --version)"; \
	  .venv-$$v/bin/python -m pytest -p no:cacheprovider -q -m "not extras" $(CORE_TESTS) || exit 1; \
	done; } >.core-pythons.log 2>&1; code=$$?; cat .core-pythons.log; exit $$code

lint: setup  ## ruff (lint and format) and mypy, as make test runs them
	$(BIN)/ruff check resumable_core tests bench
	$(BIN)/ruff format --check resumable_core tests bench
	MYPY_CACHE_DIR=$(MYPY_CACHE_DIR) $(BIN)/mypy

matrix: setup
	$(BIN)/python -m resumable_core matrix

grade: setup  ## make grade SUBMISSIONS=path/to/zip-or-folder ASSIGNMENT=reconcile JOBS=2 GRADE_ARGS=--resume
	$(BIN)/python -m resumable_core grade $(SUBMISSIONS) --assignment $(or $(ASSIGNMENT),reconcile) --jobs $(or $(JOBS),2) $(GRADE_ARGS)

release: setup  ## regenerate exercises/ from solutions/ with nbgrader, and exercises/<a>/ko/ from each Korean source solutions/<a>/ko/
	$(BIN)/python -m resumable_core.course.release release

student-kit: setup  ## dist/student-kit.zip (and unpacked beside it): what a learner gets, no answers; LANG=ko: dist/student-kit-ko.zip
	$(BIN)/python -m resumable_core.course.student_kit --lang $(KIT_LANG)

self-study-kit: setup  ## dist/self-study-kit.zip (and unpacked beside it): the student kit, every check and a worked solution per answer; LANG=ko: in Korean
	$(BIN)/python -m resumable_core.course.student_kit --edition self-study-kit --lang $(KIT_LANG)

# The class on this machine, as root: accounts, exchange, course, environments, then JupyterHub
# (docs/running-a-class.md). HUB_ARGS, e.g. --root DIR --assignment reconcile --db-url URL.
HUB_ROOT ?= /srv/resumable-class

hub: setup  ## a real class on JupyterHub on this machine, as root (docs/running-a-class.md)
	$(BIN)/python -m resumable_core.course.hub setup --root $(HUB_ROOT) $(HUB_ARGS)
	$(BIN)/python -m resumable_core.course.hub start --root $(HUB_ROOT)

hub-remove:  ## remove the class's accounts (the ra- prefix; $(HUB_ROOT) is left to you)
	$(BIN)/python -m resumable_core.course.hub remove --root $(HUB_ROOT)

bench: setup  ## checkpoint save cost and crash-matrix benchmarks (~3 min)
	$(BIN)/python bench/bench_checkpoint.py
	$(BIN)/python bench/bench_matrix.py

bench-sandbox: setup  ## one submission with and without the sandbox, and where its time goes (~4 min)
	$(BIN)/python bench/bench_sandbox.py

bench-grading: setup  ## each assignment, 60 submissions: sequential nbgrader autograde vs grade --jobs 1 and 2, sandboxed (~40 min; `--students 6 --jobs 2`: ~7 min)
	$(BIN)/python bench/bench_grading.py

clean:
	rm -rf $(VENV) .venv-3.* .core-pythons.log .pytest_cache
