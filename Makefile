# perfbench developer commands. `make help` lists them.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The tests whose outcome depends on the Python version (asyncio's eager tasks, and aiohttp's
# branches on them): `make timing PYTHON=python3.12 VENV=.venv-3.12` runs them on another one.
TIMING := tests/unit/test_pool.py tests/e2e/test_timing_under_load.py \
	tests/e2e/test_model_agent.py tests/e2e/test_hostile_servers.py tests/conformance

.PHONY: help install demo test lint typecheck unit bench timing clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install perfbench with its dev tools

demo: $(STAMP) ## run the example suite on the embedded mock agent (no API key)
	$(VENV)/bin/perfbench run cases/ --runs 5

lint: $(STAMP) ## ruff and mypy --strict
	$(VENV)/bin/ruff check perfbench tests
	$(VENV)/bin/ruff format --check perfbench tests
	$(VENV)/bin/mypy --strict perfbench

test: lint ## lint, type-check and run the test suite
	$(PY) -m pytest -q

timing: $(STAMP) ## the timing tests alone (on another Python: PYTHON=python3.12 VENV=.venv-3.12)
	$(PY) -m pytest -q -p no:cacheprovider $(TIMING)

bench: $(STAMP) ## benchmarks: harness overhead and memory, mock server under wrk; prints figures
	$(PY) -m pytest tests/bench --benchmark-enable -q -p no:cacheprovider
	$(PY) tests/bench/wrk_mock.py
	$(PY) tests/bench/client_figures.py
	$(PY) tests/bench/memory_1m.py
	$(PY) tests/bench/report_scale.py
	$(PY) tests/bench/rate_limits.py

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .venv-3.* .pytest_cache .mypy_cache .ruff_cache .benchmarks
