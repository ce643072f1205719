# replaydb: the README's two commands are `make demo` and `make test`; both do all set-up.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
BENCH_ARGS ?=
GOLDEN ?=

.PHONY: install demo test test-all golden-update bench lint clean bench-env-flink

$(STAMP): pyproject.toml setup.py
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m replaydb.demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-all: $(STAMP)
	$(BIN)/python -m pytest -m "slow or not slow" $(PYTEST_ARGS)

# Rewrite the expected sections of the golden query cases (tests/queries/README.md) after a
# reviewed change; GOLDEN=pattern limits it to the cases whose name contains the pattern.
golden-update: $(STAMP)
	$(BIN)/python -m tests.queries.regen $(GOLDEN)

bench: $(STAMP)
	$(BIN)/python -m replaydb.bench.run_all $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

# Apache Flink (the MATCH_RECOGNIZE peer of the pattern benchmarks) lives in its own virtual
# environment: apache-beam, which apache-flink pulls in, needs a pyarrow older than pyspark's.
FLINK_VENV := .venv-flink
FLINK_VERSION := 2.3.0
FLINK_STAMP := $(FLINK_VENV)/.installed-$(FLINK_VERSION)

$(FLINK_STAMP):
	@test -x $(FLINK_VENV)/bin/python || $(PY) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'apache-flink==$(FLINK_VERSION)'
	$(FLINK_VENV)/bin/python -c 'import pyflink.table'
	@touch $(FLINK_STAMP)

bench-env-flink: $(FLINK_STAMP)

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis demo-store spark-warehouse
