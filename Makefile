# perfbench developer commands. `make help` lists them.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
# The tests whose outcome depends on the Python version (asyncio's eager tasks, and aiohttp's
# branches on them): `make timing PYTHON=python3.12 VENV=.venv-3.12` runs them on another one.
# (tests/conformance/test_servers.py asserts no timing: it runs with the rest, in two processes.)
TIMING := tests/unit/test_pool.py tests/e2e/test_timing_under_load.py \
	tests/e2e/test_model_agent.py tests/e2e/test_hostile_servers.py \
	tests/conformance/test_targets.py tests/conformance/test_proxied_targets.py

.PHONY: help install demo example test test-slow lint typecheck unit bench bench-locust profile timing clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Two steps: what the demo needs (perfbench and its runtime dependencies: a minute, where Ray
# and the dev tools took three more), then what the tests and the linters need on top of it.
$(RUNTIME): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PY) -m pip install --quiet -e '.[dev,ray,otel]'
	$(PY) -m pip install --quiet --no-deps 'apache-otava>=0.8' 'scipy>=1.16,<1.17'  # [history]: Otava pins numpy==2.2.0
	touch $(STAMP)

install: $(STAMP) ## create .venv and install perfbench with its dev tools

demo: $(RUNTIME) ## run the example suite on the embedded mock agent (no API key, no dev tools)
	$(VENV)/bin/perfbench run cases/ --runs 5

# The example report: the demo suite on the in-process mock, v1 as it is and v2 on a profile
# made from mocks/default.yaml with every latency ×1.3 (seed 0, 5 runs each: with 3 a side the
# smallest p is 0.05, so no change could be significant). The runs' meta.json and gzipped
# summary.json are kept in reports/example/inputs/ (a report never reads samples.jsonl; runs/ is
# git-ignored), and the report is always rendered from those copies, as the test does: a change
# of wording is `make example`, in seconds; FRESH=1 measures the two runs again (2 minutes).
EXAMPLE := reports/example
define SLOWER
import yaml
profile = yaml.safe_load(open("mocks/default.yaml", encoding="utf-8"))
profile["name"] = "slower"
profile["description"] = "mocks/default.yaml with every latency x1.3 (make example)"
for key in ("ttft_ms", "itl_ms"):
    profile[key]["lognormal"] = {k: round(v * 1.3, 3) for k, v in profile[key]["lognormal"].items()}
profile["tool_latency_scale"] = round(profile["tool_latency_scale"] * 1.3, 3)
print(yaml.safe_dump(profile, sort_keys=False, allow_unicode=True), end="")
endef
export SLOWER

example: $(STAMP) ## re-render reports/example/ from its runs (FRESH=1: run them again first)
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	if [ -n "$(FRESH)" ] || [ ! -d $(EXAMPLE)/inputs ]; then \
		rm -rf $(EXAMPLE) && mkdir -p $(EXAMPLE); \
		$(PY) -c "$$SLOWER" > $(EXAMPLE)/slower.yaml; \
		$(VENV)/bin/perfbench run cases/ --runs 5 -t mock --label v1 --out $$tmp/fresh -q > /dev/null; \
		$(VENV)/bin/perfbench run cases/ --runs 5 -t mock:$(EXAMPLE)/slower.yaml --label v2 \
			--out $$tmp/fresh -q > /dev/null; \
		for run in $$tmp/fresh/*/; do \
			kept=$(EXAMPLE)/inputs/$$(basename $$run); mkdir -p $$kept; \
			cp $$run/meta.json $$kept/; gzip -9n < $$run/summary.json > $$kept/summary.json.gz; \
		done; \
	fi; \
	find $(EXAMPLE) -maxdepth 1 -type f ! -name slower.yaml -delete; \
	for kept in $(EXAMPLE)/inputs/*/; do \
		run=$$tmp/runs/$$(basename $$kept); mkdir -p $$run; \
		cp $$kept/meta.json $$run/; gunzip -c $$kept/summary.json.gz > $$run/summary.json; \
	done; \
	$(VENV)/bin/perfbench report v1 v2 --baseline v1 --root $$tmp/runs --out $(EXAMPLE)

lint: $(STAMP) ## ruff, mypy --strict and the layer contracts (import-linter, pyproject.toml)
	$(VENV)/bin/ruff check perfbench tests
	$(VENV)/bin/ruff format --check perfbench tests
	$(VENV)/bin/mypy --strict perfbench
	$(VENV)/bin/lint-imports --no-cache --no-logo

# The rest of the suite runs in two processes (pytest-xdist, a file to a process). Most of it
# waits on child processes, servers and sockets: two workers used 974 s of CPU (measured at load
# 15, more than idle) in a phase that takes 602 s on an idle machine, 1,204 core-seconds, so
# TEST_WORKERS=3 may be faster; it is not the default, as a third process is load on the
# others and no quiet-machine timing of it exists yet. The timing tests, and the end-to-end files
# that assert latencies against the mock's profile, run after it alone, on an idle machine
# (test_record_replay.py among them: a replay's TTFT against the live run's, 13% off at load 5
# beside two other workers).
# test_proxied_targets.py is a timing file (its agents' behaviour depends on the Python) but
# asserts no latency, and derives its timeout from a start-up it measures: it runs in parallel,
# as does test_calibrate.py (it asserts a ceiling was measured, not how high).
TEST_WORKERS ?= 2
SERIAL := $(filter-out tests/conformance/test_proxied_targets.py,$(TIMING)) \
	tests/e2e/test_mock_server.py tests/e2e/test_sweep_http.py tests/e2e/test_record_replay.py

# The statistical simulations (100 seeded comparisons) and the longest property tests are marked
# `slow`: make test leaves them to make test-slow, which CI (.ci/run) runs too.
test: lint ## lint, type-check and run the test suite (but the slow simulations)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" $(SERIAL:%=--ignore=%)
	$(PY) -m pytest -q -m "not slow" $(SERIAL)

test-slow: $(STAMP) ## the slow tests alone: statistical simulations, long property tests
	$(PY) -m pytest -q -n 2 -m slow -p no:cacheprovider

timing: $(STAMP) ## the timing tests alone (on another Python: PYTHON=python3.12 VENV=.venv-3.12)
	$(PY) -m pytest -q -p no:cacheprovider $(TIMING)

bench: $(STAMP) ## benchmarks: harness overhead and memory, mock server under wrk; prints figures
	$(PY) -m pytest tests/bench --benchmark-enable -q -p no:cacheprovider
	$(PY) tests/bench/wrk_mock.py
	$(PY) tests/bench/client_figures.py
	$(PY) tests/bench/client_cost.py
	$(PY) tests/bench/memory_1m.py
	$(PY) tests/bench/reader_memory.py
	$(PY) tests/bench/report_scale.py
	$(PY) tests/bench/rate_limits.py
	$(PY) tests/bench/proxy_overhead.py --proxy-core 0
	$(PY) tests/bench/ray_scaling.py
	$(PY) tests/bench/client_layers.py
	$(PY) tests/bench/http_clients.py

# perfbench's streamed tokens per CPU-second against Locust's FastHttpUser. Locust is not one of
# perfbench's packages: it gets a virtual environment of its own, .venv-locust.
bench-locust: $(STAMP) ## streams: perfbench against Locust (installs Locust in .venv-locust)
	test -x .venv-locust/bin/python || $(PYTHON) -m venv .venv-locust
	.venv-locust/bin/python -m pip install --quiet 'locust>=2.40'
	$(PY) tests/bench/locust_streams.py --python .venv-locust/bin/python

# Where one worker's CPU goes on short tasks against the mock server (the server on core 1, the
# client on core 0): py-spy's collapsed stacks in profile.txt (speedscope or flamegraph.pl open
# them), the top functions and perfbench modules printed. py-spy is installed here, not by test.
profile: $(STAMP) ## profile a worker on short tasks (py-spy; profile.txt)
	$(PY) -m pip install --quiet 'py-spy>=0.3'
	$(PY) tests/bench/client_cost.py --profile --out profile.txt

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .venv-3.* .venv-locust .pytest_cache .mypy_cache .ruff_cache .benchmarks
