"""Case weights (`weight:` in a suite, Locust's task weights): a case of weight 3 runs three
times a pass for each run of a weight-1 case, round by round; in a timed loop, as often. A
suite that gives no weight keeps its digest, so runs made before stay comparable."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from perfbench import store
from perfbench.engine.session import Session
from perfbench.spec import Plan, RunSpec
from perfbench.suite import Suite, load_suite
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile, write_suite

MIX = """cases:
  - id: heavy
    language: en
    input: What is the refund policy?
    weight: 3
  - id: light
    language: en
    input: What are the opening hours?
"""


async def _run(suite: Suite, plan: Plan, out: Path) -> list[str]:
    """The measured tasks' cases in the order they finished (under virtual time)."""
    session = Session(RunSpec(plan=plan, out=str(out)), suite=suite,
                      target=MockAgent(fixed_profile()))  # fmt: skip
    result = await session.run()
    assert result.run_dir is not None and result.meta["status"] == "completed"
    samples = list(store.read_samples(result.run_dir))
    assert session.planned_tasks() in (0, len(samples))
    return [s.case for s in samples if s.phase == "measured"]


@pytest.mark.anyio
async def test_a_pass_runs_each_case_weight_times_round_by_round(tmp_path: Path) -> None:
    suite = load_suite([write_suite(tmp_path / "mix.yaml", MIX)])
    order = await _run(suite, Plan(runs=1, warmup=0, repeat=2), tmp_path / "runs")
    assert Counter(order) == {"heavy": 6, "light": 2}
    assert order[:2] == ["heavy", "light"]  # interleaved, not all the heavy ones first


@pytest.mark.anyio
@pytest.mark.parametrize("concurrency", [1, 3])
async def test_a_timed_loop_keeps_the_mix(tmp_path: Path, concurrency: int) -> None:
    suite = load_suite([write_suite(tmp_path / "mix.yaml", MIX)])
    plan = Plan(runs=1, warmup=0, concurrency=concurrency, duration_s=30)
    counts = Counter(await _run(suite, plan, tmp_path / "runs"))
    assert counts["light"] >= 5
    assert 2.5 <= counts["heavy"] / counts["light"] <= 3.5, counts


def test_a_suite_without_weights_keeps_its_digest(tmp_path: Path) -> None:
    before = load_suite([CASES]).digest
    assert before.startswith("5d04a86511cf")  # the digest runs of cases/ have recorded
    weighted = write_suite(tmp_path / "w.yaml", MIX)
    unweighted = write_suite(tmp_path / "u.yaml", MIX.replace("    weight: 3\n", ""))
    assert load_suite([weighted]).digest != load_suite([unweighted]).digest
