"""Agents whose model calls go through perfbench's proxy, against the loopback mock's faults:
a ``cmd:`` program (a strict standard-library client) and a ``python:`` function with
``--proxy`` (the official openai SDK, no retries). Each fault reaches the agent, which fails
of it; the task then reads as the same fault would for a model target (``MODEL`` in
test_targets.py: one ``sample.ERROR_KINDS`` vocabulary), whatever the agent made of it
(an exit status, an SDK exception), and the failed call is the task's step. asyncio only:
the proxy is an aiohttp server in perfbench's loop. Real sockets and real time: only the stall
needs its case's timeout to fire, so only its cases get a short one, 1 s of work plus the
agents' start-up as measured here (a ``cmd:`` agent is a new interpreter, which took 1 s at load
average 10 where it takes 50 ms idle); the other faults keep a case's default (60 s), a bound
they never meet."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfbench.mock.profile import load_profile
from perfbench.mock.server import serve_in_thread
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import Case, Suite
from tests.conformance.test_targets import FAULTS, MODEL, SUITE, _check, _measure

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
TARGETS = {
    "cmd": f"cmd:{sys.executable} {AGENTS / 'urllib_agent.py'}",
    "python": "python:routed_agents:strict_stream",
}
DEFAULT_TIMEOUT: float = Case.model_fields["timeout_s"].default


def _start_up() -> float:
    """Seconds the ``cmd:`` agent's interpreter takes to start and import what it imports, at
    this machine's load now: the slowest of three rounds of two starts at once, as the run
    starts its two cases (-c 2)."""
    code = "import json, os, sys, urllib.request"
    took = []
    for _ in range(3):
        start = time.perf_counter()
        both = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
        assert [proc.wait(timeout=60) for proc in both] == [0, 0]
        took.append(time.perf_counter() - start)
    return max(took)


@pytest.fixture(scope="module")
def suites() -> dict[str, Suite]:
    """Each fault's conformance cases. The stall's time out after 1 s plus four measured
    start-ups (a fixed 1 s failed as a timeout before the agent had started); the others keep
    the default timeout, as a timeout there is no part of the fault: ``none-cmd`` failed
    after a measured 6.4 s at load average 16, its agent not yet answered."""
    timeout = round(1.0 + 4 * _start_up(), 1)
    stalled = [case.model_copy(update={"timeout_s": timeout}) for case in SUITE.cases]
    unbounded = [case.model_copy(update={"timeout_s": DEFAULT_TIMEOUT}) for case in SUITE.cases]
    return {
        fault: Suite.of(SUITE.name, stalled if fault == "stall" else unbounded) for fault in FAULTS
    }


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, suites: dict[str, Suite]
) -> Iterator[dict[str, str]]:
    """One mock server per fault, each on its own loop in a thread. The stall begins when the
    request arrives, after the task started: 1 s more than the timeout outlasts it (a longer
    one only delays the servers' shutdown, which waits for it)."""
    folder = tmp_path_factory.mktemp("proxied")
    stall_s = 1 + max(case.timeout_s for case in suites["stall"].cases)
    urls: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(AGENTS))  # routed_agents, for the python: target
        for fault in FAULTS:
            faults = "" if fault == "none" else f"faults: {{{fault}: 1.0, stall_s: {stall_s}}}\n"
            path = folder / f"{fault}.yaml"
            path.write_text(
                "ttft_ms: 5\nitl_ms: 1\noutput_chars: 40\n"
                "models: {sim: {tokens_per_char: {default: 0.25}}}\n" + faults
            )
        with (
            serve_in_thread(load_profile(str(folder / "none.yaml"))) as none,
            serve_in_thread(load_profile(str(folder / "error_500.yaml"))) as e500,
            serve_in_thread(load_profile(str(folder / "error_503.yaml"))) as e503,
            serve_in_thread(load_profile(str(folder / "reset.yaml"))) as reset,
            serve_in_thread(load_profile(str(folder / "truncate.yaml"))) as truncate,
            serve_in_thread(load_profile(str(folder / "malformed.yaml"))) as malformed,
            serve_in_thread(load_profile(str(folder / "stall.yaml"))) as stall,
        ):
            for fault, server in zip(
                FAULTS, (none, e500, e503, reset, truncate, malformed, stall), strict=True
            ):
                urls[fault] = server.url
            yield urls


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_reaches_a_proxied_agent_and_reads_as_it_would_for_a_model_target(
    servers: dict[str, str], suites: dict[str, Suite], fault: str, kind: str
) -> None:
    suite = suites[fault]
    target = TargetSpec(TARGETS[kind], proxy=kind == "python", upstream="openai/m",
                        base_url=servers[fault] + "/v1", retries=0)  # fmt: skip
    spec = RunSpec(target=target, plan=Plan(runs=1, warmup=0, concurrency=2), out=None)
    got = _measure(spec, "asyncio", suite=suite)
    _check(got, MODEL[fault])
    for sample in got.values():
        models = [s for s in sample.steps if s.kind == "model"]
        assert sample.model_calls == len(models) == 1  # the one call, failed or not
        if fault not in ("none", "stall"):  # the agent saw the fault and failed of it
            assert models[0].status != "ok" and "then the agent failed" in (sample.error or "")
    assert set(got) == {case.id for case in suite.cases}
