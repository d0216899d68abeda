"""Timing at the client's ceiling, on the production stack (asyncio, aiohttp, the mock server
in its own process): no task waits for a pooled connection, and the client's own delay in
reading is a figure of its own. Bounded: 2 × 2,000 short tasks."""

from __future__ import annotations

from pathlib import Path

from perfbench import api
from perfbench.spec import Plan, RunSpec, TargetSpec

ZERO = """name: zero
ttft_ms: 0
itl_ms: 0
output_chars: 4
models: {sim: {tokens_per_char: {default: 0.25}}}
"""
CASE = "cases:\n  - {id: one, language: en, input: hello, timeout_s: 60}\n"


def test_at_the_ceiling_no_task_waits_for_a_pooled_connection(tmp_path: Path) -> None:
    """On Python 3.11 aiohttp's writer task, not done until its first step, deferred 72–75% of
    connection releases: with the pool sized to the concurrency, a slot's next task found none
    free (wait P95 86 ms, P99 268 ms, max 0.95 s at 64 in flight here; now P99 0.17 ms)."""
    (tmp_path / "zero.yaml").write_text(ZERO)
    (tmp_path / "s.yaml").write_text(CASE)
    target = TargetSpec(f"mock+http:{tmp_path / 'zero.yaml'}", stream=False)
    plan = Plan(runs=1, warmup=1, repeat=2000, concurrency=64, workers=1)
    result = api.run(RunSpec.build([tmp_path / "s.yaml"], target, plan, out=None),
                     interruptible=False)  # fmt: skip
    overall = result.summary["pooled"]["overall"]
    assert overall["ok"] == 2000
    wait = overall["wait"]
    assert wait["p99"] < 0.050, wait  # generous: a loaded CI machine, not a deferred release
    # The client's own delay in reading (its queueing at 64 in flight) is measured, per call,
    # and kept out of the latencies, which end at the bytes' arrival.
    read_delay = overall["read_delay"]
    assert read_delay is not None and read_delay["n"] == 2000
