"""A sweep over real HTTP: the mock server with a 16-request concurrency limit, auto doubling
and bisection. The knee must come out at 16 (±1 bisection level) with a throughput plateau."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from perfbench.engine.observer import RunObserver
from perfbench.engine.sweep import Sweep
from perfbench.spec import Plan, SweepPlan, SweepSpec
from perfbench.stats.knee import Level
from perfbench.suite import load_suite
from perfbench.targets.registry import resolve
from perfbench.targets.target_spec import Sizing
from tests.helpers import write_suite

PROFILE = """
ttft_ms: 200
itl_ms: 2
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
rate_limits: {concurrent: 16}
"""


def test_sweep_over_http_finds_the_concurrency_limit(tmp_path: Path) -> None:
    profile = tmp_path / "c16.yaml"
    profile.write_text(PROFILE)
    suite = load_suite(
        [write_suite(tmp_path / "s.yaml", "cases:\n  - {id: c, language: en, input: hi}\n")]
    )
    seen: list[Level] = []
    plan = SweepPlan(base=Plan(runs=1, warmup=0, repeat=64), max_level=64, bisect_steps=3)

    def factory(n: int):  # type: ignore[no-untyped-def]
        return resolve(f"mock+http:{profile}", Sizing(concurrency=n))

    class Levels(RunObserver):
        def level_finished(self, level: Level, reason: str | None, sweep_dir: Path) -> None:
            seen.append(level)

    spec = SweepSpec(plan=plan, out=str(tmp_path / "runs"))
    sweep = Sweep(spec, Levels(), suite=suite, factory=factory)
    result = anyio.run(sweep.run)
    assert result.findings["knee"] in (16, 17, 18)
    assert result.findings["knee_throughput"] > 0
    assert result.findings["client_bound_levels"] == []
    sixteen = next(v for v in result.levels if v.level == 16)
    assert sixteen.throttle_rate == 0 and sixteen.error_rate == 0


def test_adaptive_over_http_settles_at_the_request_rate_limit(tmp_path: Path) -> None:
    """Against 1,200 requests per minute (20/s), AIMD throughput lands within 10% of 20/s."""
    from perfbench.engine.runner import Runner
    from perfbench.load import Adaptive
    from perfbench.stats.summary import Summarizer
    from perfbench.store.recorder import Recorder

    profile = tmp_path / "rpm.yaml"
    profile.write_text(
        PROFILE.replace("ttft_ms: 200", "ttft_ms: 50").replace(
            "{concurrent: 16}", "{requests_per_minute: 1200, burst_s: 1}"
        )
    )
    suite = load_suite(
        [write_suite(tmp_path / "s.yaml", "cases:\n  - {id: c, language: en, input: hi}\n")]
    )
    summarizer = Summarizer({"c": 60.0})

    async def go() -> None:
        target = resolve(f"mock+http:{profile}", Sizing(concurrency=64))
        plan = Plan(runs=1, warmup=0, repeat=240, load=Adaptive(start=1, maximum=64))
        async with target:  # type: ignore[attr-defined]
            await Runner(suite, target, plan, Recorder(summarizer)).run()

    anyio.run(go)
    overall = summarizer.finish()["runs"][0]["overall"]
    assert overall["throughput"] == pytest.approx(20.0, rel=0.10)
