"""ab's paired test (issue 36): Wilcoxon's signed-rank test on the per-round ratios, its power
rule, and what pairing buys when every round's two runs share the machine's state."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from typing import Any

import pytest

from perfbench.report.compare_md import comparison
from perfbench.stats import paired, power
from perfbench.stats.compare import Comparison, Rules, compare
from perfbench.stats.ranks import midranks


def brute_force(diffs: list[float]) -> float:
    """The signed-rank p by listing every sign pattern (independent of ``paired``'s table)."""
    kept = [d for d in diffs if d]
    ranks = midranks([abs(d) for d in kept])
    observed = sum(r for r, d in zip(ranks, kept, strict=True) if d > 0)
    signs = list(itertools.product((0, 1), repeat=len(kept)))
    hits = sum(sum(r * s for r, s in zip(ranks, pick, strict=True)) >= observed - 1e-9
               for pick in signs)  # fmt: skip
    return hits / len(signs)


def test_signed_rank_known_values() -> None:
    assert paired.signed_rank([0.1] * 8) == 1 / 256  # every pair the same way: 1 / 2^n
    assert paired.signed_rank([-0.1] * 8) == 1.0
    assert paired.signed_rank([]) == 1.0 and paired.signed_rank([0.0, 0.0]) == 1.0
    # Ranks 1..5, the positive ones 2, 4, 5 (sum 11): 7 of the 32 patterns reach 11.
    assert paired.signed_rank([-0.1, 0.2, -0.3, 0.4, 0.5]) == pytest.approx(7 / 32)
    # Zeros are dropped (Wilcoxon's rule): the same as without them.
    assert paired.signed_rank([0.0, -0.1, 0.2, 0.0, -0.3, 0.4, 0.5]) == pytest.approx(7 / 32)
    # Textbook critical values (one-sided 0.05: n = 10 needs W+ ≥ 45, i.e. T ≤ 10).
    assert paired.critical(10, 0.05) == 45
    assert paired.critical(8, 0.05 / 9) == 36  # 8 pairs at alpha / 9: all 8 the same way
    assert paired.critical(4, 0.05) == 11  # 1/16 is not below 0.05: unattainable


def test_signed_rank_with_ties_is_the_exact_permutation_p() -> None:
    rng = random.Random(7)
    for _ in range(60):
        n = rng.randint(1, 11)
        diffs = [rng.choice([-2, -1, 0, 1, 1, 2, 3]) * 0.01 for _ in range(n)]
        assert paired.signed_rank(diffs) == pytest.approx(brute_force(diffs), abs=1e-12)


def test_signed_rank_agrees_with_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    for _ in range(100):
        n = rng.randint(2, 25)
        diffs = [rng.gauss(0.3, 1) for _ in range(n)]
        ours = paired.signed_rank(diffs)
        theirs = stats.wilcoxon(diffs, alternative="greater", method="exact").pvalue
        assert ours == pytest.approx(theirs, abs=1e-12)
    many = [rng.gauss(0.2, 1) for _ in range(80)]  # normal approximation beyond 50 pairs
    theirs = stats.wilcoxon(many, alternative="greater", method="asymptotic", correction=True)
    assert paired.signed_rank(many) == pytest.approx(theirs.pvalue, rel=1e-6)


def test_differences_are_log_ratios_or_plain_when_a_value_is_zero() -> None:
    assert paired.differences([1.0, 2.0], [1.1, 1.0]) == pytest.approx(
        [math.log(1.1), math.log(0.5)]
    )
    assert paired.differences([0.0, 0.02], [0.01, 0.02]) == [0.01, 0.0]
    assert paired.change([1.0, 2.0, 4.0], [1.1, 2.2, 4.4]) == pytest.approx(0.1)
    assert paired.change([0.0, 0.0], [0.01, 0.01]) is None  # no ratio to a zero baseline


def test_one_far_pair_is_left_out_of_the_noise_but_not_of_the_test() -> None:
    steady = [0.01, -0.01, 0.02, 0.0, -0.02, 0.01, 0.0]
    quiet = paired.noise(steady)
    assert quiet is not None and quiet < 0.02
    noisy = paired.noise([*steady, 0.8])  # one round's cold cache: the ratio 2.2
    assert noisy == pytest.approx(quiet)
    assert paired.signed_rank([*steady, 0.8]) < paired.signed_rank(steady)  # ranked, kept
    spread = [0.01, -0.05, 0.06, -0.02, 0.04, -0.06, 0.02, 0.05]  # no pair stands out
    assert paired.noise(spread) == pytest.approx(statistics.stdev(spread) / math.sqrt(2))


def test_paired_power_needs_pairs_that_can_reach_alpha() -> None:
    gate = power.Gate(0.05 / 9, 2.5, 0.10, power.DETECT_POWER, paired=True)
    assert power.fewest_runs(0.05 / 9, paired=True) == 8  # 1/256 < 0.0056 ≤ 1/128
    assert power.fewest_runs(0.05 / 9) == 5  # the rank test across 5 v 5 runs: 1/252
    assert power.detectable(0.01, (7, 7), gate) is None
    found = power.detectable(0.01, (8, 8), gate)
    assert found is not None and 0.10 <= found < 0.11  # quiet pairs: the threshold itself
    # More pairs, less noise needed; the chance rises with the effect.
    assert power.chance(0.3, 0.05, 16, gate) > power.chance(0.3, 0.05, 8, gate)
    assert power.chance(0.3, 0.05, 10, gate) > power.chance(0.15, 0.05, 10, gate)
    needs = power.runs_needed(0.2, 0.05, gate)
    assert needs is not None and needs >= 8
    assert power.chance(0.2, 0.05, needs, gate) >= gate.power
    assert power.chance(0.2, 0.05, needs - 1, gate) < gate.power or needs == 8


# A loaded machine: every round's two runs share a factor (the load at that moment) of CV
# SHARED; each run adds its own jitter of CV OWN.
SHARED, OWN = 0.08, 0.01
TIMINGS = {"p50": 0.30, "p95": 0.60, "p99": 0.70, "mean": 0.35, "ttft_p50": 0.06,
           "ttft_p95": 0.10}  # fmt: skip


def run(load: float, rng: random.Random, slower: float) -> dict[str, Any]:
    v = {k: base * load * slower * rng.gauss(1, OWN) for k, base in TIMINGS.items()}
    overall = {
        "latency": {"p50": v["p50"], "p95": v["p95"], "p99": v["p99"], "mean": v["mean"],
                    "n": 200},
        "ttft": {"p50": v["ttft_p50"], "p95": v["ttft_p95"], "n": 200},
        "throughput": 3.0 / (load * slower) * rng.gauss(1, OWN),
        "error_rate": 0.0, "throttle_rate": 0.0, "tokens_in": 170.0, "tokens_out": 40.0,
        "cost_per_task": 1e-4,
    }  # fmt: skip
    return {"overall": overall, "cases": {}, "languages": {}}


def rounds(seed: int, slower: float, n: int = 8) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both sides' runs of ``n`` interleaved rounds; the candidate ``slower`` times slower."""
    rng = random.Random(seed)
    loads = [rng.lognormvariate(0, SHARED) for _ in range(n)]
    base = [run(load, rng, 1.0) for load in loads]
    cand = [run(load, rng, slower) for load in loads]
    return {"runs": base}, {"runs": cand}


def both(seed: int, slower: float) -> tuple[Comparison, Comparison]:
    base, cand = rounds(seed, slower)
    return compare(base, cand, Rules(paired=True)), compare(base, cand, Rules())


def test_a_paired_row_says_the_pairs_change_and_noise() -> None:
    with_pairs, without = both(0, 1.3)
    row = next(r for r in with_pairs.rows if r.metric == "p50")
    assert row.paired and row.p == 1 / 256 and row.verdict == "regression"
    assert row.change == pytest.approx(0.3, abs=0.02)
    assert row.noise is not None and row.noise < 0.02  # the shared load cancels out
    other = next(r for r in without.rows if r.metric == "p50")
    assert other.noise is not None and other.noise > 0.05  # counted as noise across runs


def test_the_markdown_names_the_paired_test() -> None:
    with_pairs, without = both(3, 1.0)
    meta = {"id": "x", "suite": {"name": "s", "digest": "d"}, "status": "completed"}
    assert "Wilcoxon signed-rank" in comparison(with_pairs, meta, meta, [], "pass")
    text = comparison(without, meta, meta, [], "pass")
    assert "Mann-Whitney" in text and "Wilcoxon" not in text


def test_unequal_sides_are_compared_unpaired_with_a_warning() -> None:
    base, cand = rounds(1, 1.0)
    found = compare(base, {"runs": cand["runs"][:7]}, Rules(paired=True))
    assert not any(r.paired for r in found.rows)
    assert any("cannot be paired" in w for w in found.warnings)


def test_too_few_pairs_are_underpowered_and_said() -> None:
    base, cand = rounds(2, 1.0, n=4)
    found = compare(base, cand, Rules(paired=True))
    assert any("4 pairs of runs" in w and "--rounds 5 or more" in w for w in found.warnings)
    base, cand = rounds(2, 1.0, n=5)
    found = compare(base, cand, Rules(paired=True))
    assert not found.warnings  # 1/32 is below alpha…
    assert found.underpowered  # …but not below alpha / m: no metric alone could fail


@pytest.mark.slow  # make test-slow: 240 seeded comparisons, about a minute
def test_pairing_catches_a_shift_under_a_shared_load_that_the_rank_test_cannot() -> None:
    """Simulated ab rounds (8 a side) at 8% shared load noise: the paired test flags a 15%
    slowdown nearly always and raises no more false alarms than alpha; the unpaired test,
    whose runs carry the load as noise, misses the slowdown often and calls its A/A
    underpowered."""
    trials = 60
    caught = {"paired": 0, "unpaired": 0}
    alarms = {"paired": 0, "unpaired": 0}
    blind = {"paired": 0, "unpaired": 0}
    for seed in range(trials):
        for name, found in zip(caught, both(seed, 1.15), strict=True):
            caught[name] += found.verdict == "regression"
        for name, found in zip(caught, both(1000 + seed, 1.0), strict=True):
            alarms[name] += found.verdict in ("regression", "inconclusive")
            blind[name] += bool(found.underpowered)
    assert caught["paired"] >= 0.95 * trials, caught
    assert caught["unpaired"] <= 0.5 * trials, caught
    assert alarms["paired"] <= 0.05 * trials, alarms
    assert blind["paired"] == 0 and blind["unpaired"] >= 0.9 * trials, blind


def test_ab_asks_for_the_rounds_a_change_in_one_gated_metric_needs() -> None:
    from perfbench import ab
    from perfbench.cli import rules

    assert ab.least_rounds(0.05, 12) == 8  # 1/256 < 0.05/12 ≤ 1/128
    assert ab.least_rounds(0.05, 13) == 9  # 1/512 < 0.05/13 < 1/256
    assert ab.least_rounds(0.05, 2) == 6  # --gate p50,throughput: 1/64 < 0.025
    assert ab.least_rounds(0.05, 1) == 5
    # ab's default rounds can flag a change in any one metric of the default gate, whatever
    # metrics the gate gains (it had 13 where 12 were assumed: a pass that could not fail)
    gate = rules.gate_rules(rules.settings(None), None, None, None, None, None, None, None)
    assert ab.least_rounds(gate.alpha, len(gate.gate)) <= ab.DEFAULT_ROUNDS
