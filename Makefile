# replaydb: the README's two commands are `make demo` and `make test`; both do all set-up.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: install demo test test-all bench lint clean

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

bench: $(STAMP)
	$(BIN)/python -m replaydb.bench.run_all $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis demo-store spark-warehouse
