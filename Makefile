# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each creates the virtual environment if needed and installs the project into it (not in
# editable mode, so the tests exercise what a user installs).

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.orion-installed
SOURCES := pyproject.toml $(shell find orion plugins statecharts examples -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.json' \) 2>/dev/null)
PYTEST_ARGS ?=

.PHONY: demo test bench check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/python -m pip install --quiet ".[test,otel]"
	@rm -rf build
	@touch $@

demo: $(STAMP)
	$(BIN)/orion demo

test: $(STAMP)
	$(BIN)/orion check
	$(BIN)/pytest $(PYTEST_ARGS)

bench: $(STAMP)
	for script in bench/bench_*.py; do $(BIN)/python $$script || exit 1; done

check: $(STAMP)
	$(BIN)/orion check

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
