"""`perfbench history`'s statistics on constructed series: Apache Otava's E-divisive means
finds the level shift, names its run and direction, and the gate fails only on a recent one
for the worse (issue 36)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from perfbench.report.history_md import markdown
from perfbench.stats.compare import Rules
from perfbench.stats.gate import build_rules
from perfbench.stats.history import history

pytest.importorskip("otava.analysis")


def overall(p50: float, throughput: float) -> dict[str, Any]:
    return {
        "latency.p50": {"median": p50},
        "throughput": {"median": throughput},
        "error_rate": {"median": 0.0},
    }


def series(slower_from: int | None, seed: int = 1, n: int = 12) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        factor = 1.25 if slower_from is not None and i >= slower_from else 1.0
        p50 = 0.4 * factor * rng.gauss(1, 0.03)
        out.append(overall(p50, 2.0 / factor * rng.gauss(1, 0.03)))
    return out


RULES = build_rules({}, gate=["p50,throughput,error_rate"])
NAMES = [f"v1.{i}" for i in range(12)]


def test_a_25_percent_slowdown_from_run_7_is_a_change_point_there_for_the_worse() -> None:
    found = history(NAMES, series(slower_from=6), RULES)
    p50 = next(s for s in found.series if s.metric == "p50")
    assert [s.run for s in p50.shifts] == ["v1.6"]  # the 7th run
    shift = p50.shifts[0]
    assert shift.direction == "slower" and shift.worse and shift.p < 0.001
    assert shift.change == pytest.approx(0.25, abs=0.05)
    throughput = next(s for s in found.series if s.metric == "throughput")
    assert throughput.shifts[0].direction == "lower" and throughput.shifts[0].worse
    assert {s.metric for s, _ in found.regressions} == {"p50", "throughput"}
    text = markdown(found)
    assert text.startswith("## perfbench history: ❌ regression in the last 6 runs: P50")
    assert "slower +" in text and "`v1.6`" in text


def test_one_profile_throughout_has_no_change_point() -> None:
    for seed in range(5):
        found = history(NAMES, series(slower_from=None, seed=seed), RULES)
        assert not [s for s in found.series if s.shifts], seed
        assert not found.regressions


def test_an_old_regression_or_a_recent_improvement_does_not_fail() -> None:
    old = history(NAMES, series(slower_from=3), RULES, recent=6)
    assert [s.run for s in old.series[0].shifts] == ["v1.3"] and not old.regressions
    faster = list(reversed(series(slower_from=6)))  # the level falls at the 7th run
    found = history(NAMES, faster, Rules(gate=("p50",)))
    assert found.series[0].shifts[0].direction == "faster" and not found.regressions
