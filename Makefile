# icestream: `make run` sets everything up and runs every notebook headless; `make test` sets
# everything up and runs lint and the whole test suite. Both work on a fresh Debian/Ubuntu machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# ICESTREAM_SPARK_LINE selects a Spark line of lib/icestream/stack.toml ("3.5": EMR 7, Glue 5); unset, the
# venv gets constraints.txt's pyspark, the default line. A second line wants a venv of its own (VENV=...).
SPARK_LINE := $(ICESTREAM_SPARK_LINE)
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt lib/icestream/stack.toml | cksum | cut -d' ' -f1)$(if $(SPARK_LINE),-spark$(SPARK_LINE))
CONSTRAINTS := $(if $(SPARK_LINE),$(VENV)/constraints-spark$(SPARK_LINE).txt,constraints.txt)
# The JDBC catalog's SQLite driver (the local default): Debian's, unless ICESTREAM_SQLITE_JDBC_JAR names one.
SQLITE_JDBC_JAR := /usr/share/java/sqlite-jdbc.jar
CATALOG_TYPE := $(or $(ICESTREAM_CATALOG_TYPE),jdbc)
APT_PACKAGES :=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# make test runs the suite in this many pytest-xdist workers, one test file at a time each: most of
# a test's time is spent waiting (triggers, kernels, clusters), so two workers keep both cores busy.
# --no-loadscope-reorder keeps conftest's order (the longest kinds first): pytest-xdist otherwise
# hands out the files with the most tests first, and the notebook pass (3 tests, a third of the
# run) started last and ran alone at the end on one core.
TEST_WORKERS ?= 2
BENCH_ARGS ?=
LINT_PATHS := $(wildcard lib tests bench notebooks)

.PHONY: help setup system browser venv jars emulator kafka run test test-spark3.5 lint format lab stop clear-outputs clean reliability browser-all bench bench-smoke reset prune-uv-cache

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

system:  ## Java 17, Maven (fetches the JVM packages) and the SQLite JDBC driver, through apt-get when missing
	@missing=""; \
	java -version 2>&1 | grep -q 'version "17' || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	if [ "$(CATALOG_TYPE)" = jdbc ] && [ -n "$(ICESTREAM_SQLITE_JDBC_JAR)" ]; then \
	  [ -f "$(ICESTREAM_SQLITE_JDBC_JAR)" ] || { echo "error: ICESTREAM_SQLITE_JDBC_JAR=$(ICESTREAM_SQLITE_JDBC_JAR) is not a file" >&2; exit 2; }; \
	elif [ "$(CATALOG_TYPE)" = jdbc ]; then \
	  [ -f $(SQLITE_JDBC_JAR) ] || missing="$$missing libxerial-sqlite-jdbc-java"; \
	  [ -n "$$(ls /usr/lib/*/jni/libsqlitejdbc.so /usr/lib/jni/libsqlitejdbc.so 2>/dev/null || true)" ] \
	    || missing="$$missing libxerial-sqlite-jdbc-jni"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null; then \
	    echo ">> installing$$missing with apt-get"; \
	    $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "error: please install$$missing (Java 17 JRE, Maven, the SQLite JDBC driver for the catalog), or use" \
	      "environment.yml with conda and set ICESTREAM_SQLITE_JDBC_JAR (see docs/catalog.md)" >&2; exit 2; \
	  fi; \
	fi

browser:  ## Debian's chromium and chromium-driver for the browser test (tests/browser), through apt-get when missing
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if command -v apt-get >/dev/null; then \
	    echo ">> installing chromium chromium-driver with apt-get (for tests/browser)"; \
	    $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else \
	    echo "error: tests/browser needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's chromium, chromium-driver)" >&2; exit 2; \
	  fi; \
	fi

$(STAMP): pyproject.toml constraints.txt lib/icestream/stack.toml
	@echo ">> creating $(VENV) and installing pinned dependencies (first time: about a minute)"
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	@# Another Spark line: constraints.txt with that line's pyspark (stack.toml) in place of the default's.
	@$(if $(SPARK_LINE),PYTHONPATH=lib $(BIN)/python -m icestream.stack constraints $(SPARK_LINE) < constraints.txt > $(CONSTRAINTS))
	@$(BIN)/python -c 'import sys; assert sys.version_info[:2] == (3, 11), "icestream needs Python 3.11, not " + sys.version.split()[0]'
	@# uv installs the pinned set in about 40 s where pip took 2 m 21 s on the same machine (docs/testing.md).
	@$(BIN)/pip install -q -c constraints.txt uv 2>&1 | grep -v -E '^WARNING: Location' || true
	@# venv seeds setuptools 65, which nothing here needs at run time (uv builds in isolation) and whose
	@# distutils shim cost every driver and worker 0.17 s when pyspark imports distutils: Python's own is 8 ms.
	@$(BIN)/python -m pip uninstall -q -y setuptools >/dev/null 2>&1 || true
	@# Bytecode compiled once here: where PYTHONDONTWRITEBYTECODE is set (the machines this project runs its CI on) Python
	@# otherwise compiled pyspark, pandas and the rest anew in every process, 2 of its 3 CPU-seconds of imports.
	@# From uv's cache first, where an earlier install left every pin: pyspark is a source distribution, which uv
	@# downloads and builds again (about 37 CPU-seconds) whenever the index answers its revalidation as modified.
	@$(BIN)/uv pip install -q --offline --compile-bytecode --python $(BIN)/python -c $(CONSTRAINTS) -e '.[workbook,dev]' 2>/dev/null \
	  || $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -c $(CONSTRAINTS) -e '.[workbook,dev]'
	@$(BIN)/python -m compileall -q -j 0 lib/icestream >/dev/null
	@$(MAKE) --no-print-directory prune-uv-cache
	@$(BIN)/python -c 'import icestream, pyspark, papermill'  # fail here if the install did not work
	@$(BIN)/python -m ipykernel install --sys-prefix --name icestream --display-name "Python (icestream)" >/dev/null
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP)

# uv builds pyspark's source distribution anew at each install into a new environment (this venv,
# the packed executor environment of `icestream ship`) and keeps every build, about 1 GB each, in
# its cache (~/.cache/uv): 93 of them had filled 72 GB here and CI runs failed on a full disk.
# Pruning keeps the newest build of each and removes the rest.
prune-uv-cache:
	@[ ! -x $(BIN)/uv ] || $(BIN)/uv cache prune -q 2>/dev/null || true

jars: system venv  ## resolve the JVM packages, the Kafka broker's and the Connect worker's (lib/icestream/stack.toml) from Maven Central, and build the driver's class archive, into .cache/jars (once)
	@$(BIN)/python -c 'from icestream.config import load_settings; from icestream.runtime.jars import resolve_jars; p = resolve_jars(load_settings()); print(">> jvm packages:", p.source, *p.notes)'
	@$(BIN)/python -c 'from icestream.config import load_settings; from icestream.kafka import Broker; j = Broker.from_settings(load_settings()).jars(); print(">> kafka broker jars:", len(j), "in", j[0].parent)'
	@$(BIN)/python -c 'from icestream.config import load_settings; from icestream.kafka import ConnectWorker; s = load_settings(); w, p = ConnectWorker.from_settings(s).resolve(s); print(">> kafka connect jars:", w, "for the worker,", p, "for the Iceberg sink plugin")'
	@# Driver JVMs then start in about half the time (docs/performance.md); building it takes about a minute, once.
	@$(BIN)/python -m icestream.runtime.cds

setup: system venv jars  ## everything the commands below need

emulator: setup  ## start the local Kinesis emulator (idempotent)
	@echo ">> kinesis emulator: $$($(BIN)/icestream emulator start)"

kafka: setup  ## start the local Kafka broker, one KRaft node on 127.0.0.1 (idempotent)
	@echo ">> kafka broker: $$($(BIN)/icestream kafka start)"

run: emulator kafka  ## set up, then run every notebook headless into output/
	@# --quick: no throw-away Spark session; notebook 00's session checks the Iceberg classes itself.
	@$(BIN)/icestream doctor --quick
	@$(BIN)/icestream run

# The Spark 3.5 line (EMR 7, Glue 5) in a venv of its own beside .venv: the unit tests and the
# exactly-once crash campaigns, not the whole suite twice (docs/testing.md).
SPARK35_VENV := .venv-spark3.5
SPARK35_TESTS := tests/unit $(wildcard tests/reliability/test_crash*.py)
test-spark3.5: system  ## the unit tests and the crash campaigns on the Spark 3.5 line, in .venv-spark3.5
	@$(MAKE) --no-print-directory VENV=$(SPARK35_VENV) ICESTREAM_SPARK_LINE=3.5 venv jars
	@ICESTREAM_SPARK_LINE=3.5 $(SPARK35_VENV)/bin/pytest $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(SPARK35_TESTS) $(PYTEST_ARGS)

lint: venv  ## ruff on everything, mypy on lib/ (incremental: a few seconds once .mypy_cache is warm)
	@$(BIN)/ruff check $(LINT_PATHS)
	@$(BIN)/ruff format --check $(LINT_PATHS)
	@$(BIN)/mypy

format: venv  ## apply ruff's fixes and formatting
	@$(BIN)/ruff check --fix $(LINT_PATHS)
	@$(BIN)/ruff format $(LINT_PATHS)

test: system venv  ## set up, then lint and the whole test suite (TEST_WORKERS=1: in one process)
	@# The jars and the class data sharing archive (about 90 s, one JVM) build while apt-get installs the
	@# browser and ruff lints: the three need nothing of each other, and a fresh clone's set-up is a minute shorter.
	@$(MAKE) --no-print-directory jars & jars=$$!; \
	  $(MAKE) --no-print-directory browser lint || { wait $$jars; exit 1; }; \
	  wait $$jars
	@$(MAKE) --no-print-directory prune-uv-cache
	@$(BIN)/pytest $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(PYTEST_ARGS)

browser-all: setup browser  ## every notebook run through JupyterLab in headless Chromium (make test: 02 only)
	@ICESTREAM_BROWSER_ALL=1 $(BIN)/pytest tests/browser $(PYTEST_ARGS)

reliability: setup  ## the full reliability campaigns, and the cluster tests including notebooks 03, 04, 06, 08 and 09 there
	@ICESTREAM_RELIABILITY=full $(BIN)/pytest -m "reliability or cluster" $(PYTEST_ARGS)

bench: setup  ## the benchmark suite (about 15 minutes); BENCH_ARGS=--full for the larger sizes
	@$(BIN)/python bench/run_all.py $(BENCH_ARGS)

bench-smoke: setup  ## every benchmark once at small sizes: do they still run? (about 15 minutes; results not kept)
	@$(BIN)/python bench/smoke.py

lab: emulator  ## JupyterLab on 127.0.0.1 (notebooks/ and the executed copies in output/); Ctrl-C stops it
	@$(BIN)/icestream lab

stop:  ## stop the background producer, the emulator and the Kafka broker (keeps .venv, the tables, outputs and the broker's topics)
	@[ ! -x $(BIN)/icestream ] || { $(BIN)/icestream produce --stop || true; $(BIN)/icestream emulator stop || true; $(BIN)/icestream kafka stop || true; }

clear-outputs: venv  ## remove outputs saved into notebooks/ from JupyterLab (executed copies belong in output/)
	@$(BIN)/jupyter nbconvert --log-level WARN --clear-output --inplace notebooks/*.ipynb

clean: stop  ## stop everything, then DELETE the venv, jars, warehouse (your tables), run state and outputs
	rm -rf $(VENV) .cache data/warehouse data/run output .pytest_cache .ruff_cache

reset: emulator  ## drop the workbook's tables, recreate the stream, clear run state; shows the plan unless YES=1
	@$(BIN)/icestream reset $(if $(filter 1 yes,$(YES)),--yes)
