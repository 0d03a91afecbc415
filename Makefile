# Strata: make run | make test | make lint | make bench | make clean
#
# Works on a fresh machine: the virtualenv (.venv, Python 3.11) is created when
# missing and the project installed into it with its test extra; it is
# re-installed only when pyproject.toml is newer than .venv/.installed.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium
PYTEST_ARGS ?=
BENCH ?= $(filter-out %_client.py,$(sort $(wildcard bench/*.py)))
BENCH_ARGS ?=
PORT ?= 8000
export PORT

.PHONY: help run test lint bench clean distclean install java chromium

help:
	@echo "make run      run Strata locally (http://127.0.0.1:$(PORT)/): Redis, worker, beat, web, demo data"
	@echo "make test     make lint, then pytest (PYTEST_ARGS='-k locks -x' to pass options)"
	@echo "make lint     ruff check (incl. size and complexity), ruff format --check, lint-imports (import contracts)"
	@echo "make bench    run the benchmarks in bench/ (BENCH=bench/x.py BENCH_ARGS=... to choose)"
	@echo "make clean    remove caches, logs, static files and test artifacts (keeps var/ data)"
	@echo "make distclean  also remove var/ (database, segments) and .venv"

# --- environment ---------------------------------------------------------------

$(VPY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON) not found: Strata needs Python 3.11 (set PYTHON=/path/to/python3.11)" >&2; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(VPY)
	$(VPY) -m pip install --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

# PySpark 4 needs Java 17 or newer.
java:
	@java_bin="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; \
	if ! command -v "$$java_bin" >/dev/null 2>&1; then \
	  echo "error: Java 17+ is required by Spark and was not found (no java on PATH or in JAVA_HOME)." >&2; \
	  echo "       On Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless" >&2; \
	  exit 1; \
	fi; \
	version=$$("$$java_bin" -version 2>&1 | awk -F'"' '/version/ {print $$2; exit}'); \
	major=$${version%%.*}; \
	if ! [[ "$$major" =~ ^[0-9]+$$ ]] || (( major < 17 )); then \
	  echo "error: Spark needs Java 17+, but $$java_bin is version '$$version'." >&2; \
	  echo "       Install openjdk-17-jre-headless or point JAVA_HOME at a Java 17+." >&2; \
	  exit 1; \
	fi

# The browser tests drive Debian's Chromium through Playwright.
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian's chromium for the browser tests"; \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
	      -o DPkg::Lock::Timeout=600 chromium; \
	  else \
	    echo "error: $(CHROMIUM) is missing; the browser tests need Debian's chromium:" >&2; \
	    echo "       sudo apt-get update && sudo apt-get install -y chromium" >&2; \
	    exit 1; \
	  fi; \
	fi

# --- targets -------------------------------------------------------------------

run: $(STAMP) java
	$(VPY) manage.py strata_run --port $(PORT)

# `make test` runs `make lint` first: CI (.ci/run) fails on a lint or an import contract.
test: lint java chromium
	@# pytest exits 5 when it collected no tests: that is a failure too.
	@status=0; $(VENV)/bin/pytest $(PYTEST_ARGS) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests (exit 5)" >&2; fi; \
	exit $$status

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# Every script in bench/, or the ones named: make bench BENCH=bench/timeline.py BENCH_ARGS='--n 10'
bench: $(STAMP) java
	@if [ -z "$(strip $(BENCH))" ]; then echo "error: no benchmarks in bench/" >&2; exit 1; fi
	@for script in $(BENCH); do echo "== $$script"; $(VPY) $$script $(BENCH_ARGS); done

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis tests/artifacts build *.egg-info \
	  spark-warehouse metastore_db derby.log var/logs var/static
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf var $(VENV)
