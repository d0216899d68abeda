"""Power is part of the verdict (issue 36): a gated metric whose runs could not have flagged
the declared change (--detect, by default its threshold) makes the outcome "underpowered",
never a silent pass."""

from __future__ import annotations

import random

import pytest

from perfbench.report.compare_md import comparison
from perfbench.stats import power
from perfbench.stats.compare import Rules, compare
from perfbench.stats.gate import build_rules, fails, outcome
from tests.unit.test_gate_noise import NOISE, row_of, side

QUIET = {k: 0.01 for k in NOISE}  # 1% run-to-run noise on every metric
META = {"id": "x", "suite": {"name": "s", "digest": "d"}, "status": "completed"}


def test_runs_that_can_flag_their_thresholds_pass() -> None:
    rng = random.Random(1)
    result = compare(side(rng, 8, noise=QUIET), side(rng, 8, noise=QUIET), Rules())
    assert not result.underpowered
    assert outcome(result, []) == "pass"
    text = comparison(result, META, META, [], "pass")
    assert text.startswith("## perfbench compare: ✅ pass")
    assert "could not have failed" not in text


def test_too_few_runs_for_the_exact_test_are_underpowered_not_a_pass() -> None:
    """4 v 4 runs: the smallest one-sided p is 1/70 = 0.014, above 0.05/9: a change in one
    metric alone can never be flagged, however quiet the runs (the newcomer's A/A)."""
    rng = random.Random(2)
    result = compare(side(rng, 4, noise=QUIET), side(rng, 4, noise=QUIET), Rules())
    timings = {"p50", "p95", "p99", "mean", "ttft_p50", "ttft_p95", "throughput"}
    assert timings <= {r.metric for r in result.underpowered}
    assert outcome(result, []) == "underpowered"
    assert fails("underpowered", strict=True) and not fails("underpowered", strict=False)
    p50 = row_of(result, "p50")
    assert p50.needs is not None and p50.needs[0] > 4  # more runs a side would do
    text = comparison(result, META, META, [], "underpowered", strict=True)
    head = text.splitlines()[0]
    assert head.startswith("## perfbench compare: ⚠️ underpowered (P50 latency")
    assert "exit 6 (--strict)" in head and "✅" not in text
    assert f"{p50.needs[0]} runs a side would catch it" in text


def test_a_noise_bar_above_the_declared_change_is_underpowered_and_says_the_repeat() -> None:
    """P50 at 10.5% run-to-run noise: its bar (2.5 CVs) is above its 10% threshold, so no
    number of runs lets a 10% change count; more tasks a run would."""
    rng = random.Random(3)
    result = compare(side(rng, 8), side(rng, 8), Rules())
    p50 = row_of(result, "p50")
    assert p50.underpowered and p50.bar is not None and p50.bar > 0.10
    assert p50.needs is not None and p50.needs[1] > 1  # a --repeat factor
    assert "times the --repeat" in comparison(result, META, META, [], outcome(result, []))
    # Declaring a larger change to catch: the same runs can flag it.
    bigger = compare(side(random.Random(3), 8), side(random.Random(3), 8), Rules(detect=0.6))
    assert not row_of(bigger, "p50").underpowered


def test_a_change_declared_below_the_threshold_can_never_be_flagged() -> None:
    gate = power.Gate(0.005, 2.5, threshold=0.15, power=0.8)
    found = power.sensitivity(0.10, 0.01, 20, gate)
    assert not found.able and "within its 15% threshold" in found.why
    at_threshold = power.sensitivity(0.15, 0.01, 20, gate)
    assert at_threshold.able and at_threshold.plan is not None


def test_detect_is_a_flag_and_a_setting_and_is_checked() -> None:
    assert build_rules({}, detect="20%").detect == pytest.approx(0.2)
    assert build_rules({"detect": "30%"}).detect == pytest.approx(0.3)
    with pytest.raises(Exception, match="relative change such as 10%"):
        build_rules({}, detect="0%")


def test_plan_says_a_change_within_the_threshold_is_out_of_reach_because_of_it_first() -> None:
    """Issue 37 item 10: `plan --detect 10%` read "out of reach within 200 runs" on every
    timing, the real reason (the 10% threshold) last; the reason now comes first, alone."""
    gate = power.Gate(0.005, 2.5, power=0.9)
    measured = power.Measured("mean", ((1.0, 1.02, 0.99, 1.01),), threshold=0.10)
    found = power.need(measured, 0.10, 1, gate)
    assert found.plan is None
    assert found.note.startswith("a 10% change is within its 10% threshold, which the gate")
    assert "--max-regression mean=5%" in found.note and "out of reach" not in found.note
    assert power.need(measured, 0.20, 1, gate).plan is not None
