"""The release comparison's statistics: the exact test, the verdict rules and the promised error
rates (A/A false alarms, power against a 20% P95 regression, robustness to one slow run)."""

from __future__ import annotations

import itertools
import random
import statistics
from typing import Any

import pytest

from perfbench.stats.compare import Rules, compare, mann_whitney
from perfbench.stats.gate import build_rules
from perfbench.stats.histogram import Histogram
from perfbench.stats.summary import across_runs


def brute_force(high: list[float], low: list[float]) -> float:
    """P(rank sum of a random split ≥ observed) by listing every split: the definition."""
    pooled = high + low
    order = sorted(pooled)

    def midrank(v: float) -> float:
        first = order.index(v)
        return first + (order.count(v) + 1) / 2

    ranks = [midrank(v) for v in pooled]
    observed = sum(ranks[: len(high)])
    splits = list(itertools.combinations(range(len(pooled)), len(high)))
    hits = sum(sum(ranks[i] for i in s) >= observed - 1e-9 for s in splits)
    return hits / len(splits)


@pytest.mark.parametrize("seed", range(12))
def test_exact_mann_whitney_equals_enumeration_even_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    n, m = rng.randint(1, 6), rng.randint(1, 6)
    values = [float(rng.randint(0, 4)) for _ in range(n + m)]  # many ties on purpose
    assert mann_whitney(values[:n], values[n:]) == pytest.approx(
        brute_force(values[:n], values[n:])
    )


def test_mann_whitney_extremes() -> None:
    assert mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(1 / 252)
    assert mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == 1.0
    assert mann_whitney([1, 1, 1], [1, 1, 1]) == 1.0
    # The normal approximation past the exact limit agrees with the exact tail closely.
    rng = random.Random(1)
    high = [rng.gauss(0.3, 1) for _ in range(30)]
    low = [rng.gauss(0, 1) for _ in range(30)]
    assert 0.0 < mann_whitney(high, low) < 0.5


def run_metrics(
    rng: random.Random, scale: float, noise: float, tasks: int = 2000
) -> dict[str, Any]:
    """One run: a shared run-level factor (the run-to-run noise) times lognormal task latencies."""
    factor = max(0.5, rng.gauss(1.0, noise))
    latency, ttft = Histogram(), Histogram()
    for _ in range(tasks):
        v = 0.2 * scale * factor * rng.lognormvariate(0, 0.4)
        latency.add(v)
        ttft.add(v / 3)
    overall = {
        "tasks": tasks,
        "ok": tasks,
        "error_rate": 0.0,
        "throttle_rate": 0.0,
        "latency": latency.summary(),
        "ttft": ttft.summary(),
        "throughput": 16 / (latency.mean or 1),
        "tokens_in": 120.0,
        "tokens_out": 40.0,
        "cost_per_task": 0.0007,
        "expect_mismatch": 0,
    }
    return {"overall": overall, "cases": {"a": overall}, "languages": {"en": overall}}


# The run factor's spread; with the sampling noise of 2,000 tasks' P95 it makes run-level P95s
# vary by about 3% (checked below), the noise the issue specifies.
NOISE = 0.024


def test_constructed_runs_have_3_percent_run_to_run_noise_on_p95() -> None:
    rng = random.Random(11)
    p95s = [run_metrics(rng, 1.0, NOISE)["overall"]["latency"]["p95"] for _ in range(200)]
    assert 0.025 < statistics.stdev(p95s) / statistics.mean(p95s) < 0.035


def summary_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"runs": runs}


def side(rng: random.Random, scale: float, runs: int = 5, noise: float = NOISE) -> dict[str, Any]:
    return summary_of([run_metrics(rng, scale, noise) for _ in range(runs)])


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
def test_a_a_raises_no_regression_in_95_of_100_trials() -> None:
    rules = Rules()
    alarms = 0
    for seed in range(100):
        rng = random.Random(seed)
        result = compare(side(rng, 1.0), side(rng, 1.0), rules)
        alarms += result.verdict == "regression"
    assert alarms <= 5


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
def test_a_20_percent_p95_regression_is_caught_in_95_of_100_trials() -> None:
    rules = Rules()
    caught = 0
    for seed in range(100):
        rng = random.Random(1000 + seed)
        result = compare(side(rng, 1.0), side(rng, 1.2), rules)
        p95 = next(r for r in result.rows if r.scope == "overall" and r.metric == "p95")
        caught += p95.verdict == "regression" and result.verdict == "regression"
    assert caught >= 95


def with_outlier(summary: dict[str, Any], rng: random.Random, factor: float) -> dict[str, Any]:
    runs = list(summary["runs"])
    runs[2] = run_metrics(rng, factor, 0.0)
    return summary_of(runs)


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
def test_one_slow_run_does_not_flip_the_verdict() -> None:
    """The same data with one run replaced by a run twice as slow gets the same verdict: in
    A/A (slow run in the candidate) and under a real 20% regression (slow run in the baseline)."""
    rules = Rules()
    kept = {"a/a": 0, "regression": 0}
    for seed in range(100):
        rng = random.Random(5000 + seed)
        base, cand = side(rng, 1.0), side(rng, 1.0)
        clean = compare(base, cand, rules).verdict
        kept["a/a"] += compare(base, with_outlier(cand, rng, 2.0), rules).verdict == clean
        base, cand = side(rng, 1.0), side(rng, 1.2)
        clean = compare(base, cand, rules).verdict
        slow = compare(with_outlier(base, rng, 2.0), cand, rules)
        kept["regression"] += slow.verdict == clean
        assert any(r.outliers == (("baseline", 2),) for r in slow.rows)
    assert kept["a/a"] >= 95 and kept["regression"] >= 95, kept


def test_big_but_insignificant_change_is_inconclusive_and_small_changes_pass() -> None:
    rng = random.Random(7)
    noisy = compare(side(rng, 1.0, runs=3, noise=0.3), side(rng, 1.5, runs=3, noise=0.3), Rules())
    assert noisy.verdict in ("inconclusive", "regression")
    assert any("smallest possible p" in w for w in noisy.warnings)  # 3 vs 3 cannot be < 0.05
    p50 = next(r for r in noisy.rows if r.scope == "overall" and r.metric == "p50")
    assert p50.verdict == "inconclusive"
    small = compare(side(rng, 1.0, noise=0.0), side(rng, 1.05, noise=0.0), Rules())
    p50 = next(r for r in small.rows if r.scope == "overall" and r.metric == "p50")
    assert p50.p is not None and p50.p < 0.05  # significant, but under the 10% threshold
    assert p50.verdict == "pass"


def test_improvement_and_higher_is_better_metrics() -> None:
    rng = random.Random(3)
    result = compare(side(rng, 1.3), side(rng, 1.0), Rules())
    verdicts = {r.metric: r.verdict for r in result.rows if r.scope == "overall"}
    assert verdicts["p50"] == "improvement"
    assert verdicts["throughput"] == "improvement"  # higher throughput is better
    assert result.verdict == "improvement"
    slower = compare(side(rng, 1.0), side(rng, 1.3), Rules())
    assert {r.metric: r.verdict for r in slower.rows if r.scope == "overall"}["throughput"] == (
        "regression"
    )


def test_absolute_floor_keeps_tiny_latencies_from_gating() -> None:
    rng = random.Random(4)
    base, cand = side(rng, 0.001, noise=0.0), side(rng, 0.0013, noise=0.0)  # 0.2 ms → 0.26 ms
    latencies = ("p50", "p95", "p99", "mean", "ttft_p50", "ttft_p95")
    rows = [r for r in compare(base, cand, Rules()).rows if r.metric in latencies]
    assert {r.verdict for r in rows} == {"pass"}
    floorless = build_rules({}, floors=["p50=0", "p95=0", "p99=0", "mean=0", "ttft_p50=0"])
    rows = [r for r in compare(base, cand, floorless).rows if r.scope == "overall"]
    assert {r.metric for r in rows if r.verdict == "regression"} >= {"p50", "p95", "mean"}


def set_overall(summary: dict[str, Any], **values: float) -> dict[str, Any]:
    runs = []
    for run in summary["runs"]:
        overall = {**run["overall"], **values}
        runs.append({**run, "overall": overall})
    return summary_of(runs)


def test_tokens_and_cost_of_deterministic_cases_compare_exactly() -> None:
    rng = random.Random(5)
    base = side(rng, 1.0)
    cand = set_overall(side(rng, 1.0), tokens_out=41.0)  # one token more in every run
    row = next(
        r for r in compare(base, cand, Rules()).rows if r.metric == "tokens_out" and not r.key
    )
    assert row.exact and row.verdict == "regression"
    tolerant = build_rules({"max_regression": {"tokens_out": "5%"}})
    row = next(r for r in compare(base, cand, tolerant).rows if r.metric == "tokens_out")
    assert row.verdict == "pass"


def test_error_rate_gates_on_points_not_ratio() -> None:
    rng = random.Random(6)
    base = side(rng, 1.0)
    assert compare(base, set_overall(side(rng, 1.0), error_rate=0.005), Rules()).verdict != (
        "regression"
    )  # half a point: under the one-point floor
    worse = compare(base, set_overall(side(rng, 1.0), error_rate=0.04), Rules())
    row = next(r for r in worse.rows if r.metric == "error_rate" and r.scope == "overall")
    assert row.verdict == "regression" and row.ratio is None  # baseline 0: no ratio


def test_per_case_rows_are_informational_unless_gated_then_corrected() -> None:
    rng = random.Random(8)
    base, cand = side(rng, 1.0), side(rng, 1.5)
    default = compare(base, cand, Rules())
    assert default.correction == "benjamini-hochberg"  # issue 22: the gated metrics too
    assert all(not r.gated for r in default.rows if r.scope != "overall")
    assert any(r.verdict == "regression" for r in default.rows if r.scope == "case")
    everything = compare(base, cand, build_rules({}, scopes=["all"]))
    assert everything.correction == "benjamini-hochberg"
    gated = [r for r in everything.rows if r.gated and r.q is not None]
    assert gated and all(r.q is not None and r.p is not None and r.q >= r.p for r in gated)
    only = compare(base, cand, build_rules({}, gate=["p99"]))
    assert only.gated == ["p99"] and [r.metric for r in only.regressions] == ["p99"]


def test_a_metric_missing_on_one_side_is_not_applicable() -> None:
    rng = random.Random(9)
    base = side(rng, 1.0)
    cand = summary_of([{**r, "overall": {**r["overall"], "ttft": None}} for r in base["runs"]])
    row = next(r for r in compare(base, cand, Rules()).rows if r.metric == "ttft_p50")
    assert row.verdict == "n/a" and row.candidate is None


def test_report_warns_when_the_first_run_is_an_outlier() -> None:
    from perfbench.stats.advice import advise

    rng = random.Random(12)
    runs = side(rng, 1.0)["runs"]
    pooled = {"overall": runs[0]["overall"], "cases": {}}
    summary = {"runs": runs, "across_runs": across_runs(runs), "pooled": pooled}
    assert not [n for n in advise(summary, {}) if "first measured run" in n]
    slow_first = [run_metrics(rng, 1.6, 0.0), *runs[1:]]
    summary = {"runs": slow_first, "across_runs": across_runs(slow_first), "pooled": pooled}
    notes = [n for n in advise(summary, {}) if "first measured run" in n]
    assert len(notes) == 1 and "Raise --warmup" in notes[0]
