# perfbench developer commands. `make help` lists them.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help install demo test lint typecheck unit bench clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
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

bench: $(STAMP) ## benchmarks: harness overhead and memory, mock server under wrk; prints figures
	$(PY) -m pytest tests/bench --benchmark-enable -q -p no:cacheprovider
	$(PY) tests/bench/wrk_mock.py
	$(PY) tests/bench/client_figures.py
	$(PY) tests/bench/memory_1m.py
	$(PY) tests/bench/report_scale.py
	$(PY) tests/bench/rate_limits.py

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .benchmarks
