"""A sweep over real HTTP: the mock server with a 16-request concurrency limit, auto doubling
and bisection. The knee must come out at 16 (±1 bisection level) with a throughput plateau."""

from __future__ import annotations

from pathlib import Path

import anyio

from perfbench.load.knee import Level
from perfbench.runner import Plan
from perfbench.suite import load_suite
from perfbench.sweep import Sweep, SweepPlan
from perfbench.targets.registry import TargetOptions, resolve
from tests.conftest import write_suite

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
        return resolve(f"mock+http:{profile}", TargetOptions(concurrency=n))

    sweep = Sweep(
        suite,
        factory,
        plan,
        out_root=tmp_path / "runs",
        target_name="mock-http",
        on_level=lambda level, _: seen.append(level),
    )
    result = anyio.run(sweep.run)
    assert result.findings["knee"] in (16, 17, 18)
    assert result.findings["plateau_throughput"] > 0
    assert result.findings["client_bound_levels"] == []
    sixteen = next(v for v in result.levels if v.level == 16)
    assert sixteen.throttle_rate == 0 and sixteen.error_rate == 0
