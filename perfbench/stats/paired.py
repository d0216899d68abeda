"""The paired test of ``perfbench ab``: Wilcoxon's signed-rank test on the per-round ratios. Pure.

``ab`` measures the two sides interleaved, one run of each in every round, every run with the
same seed. Round i of the baseline and round i of the candidate share the machine's state at
that moment (a neighbour's load, a throttled CPU) and the simulated model's random draws, so
the ratio candidate / baseline of one round cancels what the round's two runs have in common.
A rank test across the two sides' runs (``compare.mann_whitney``) counts that shared factor
as noise: at load average 13–16 it left the timing metrics underpowered (P50 CV 3.7% across
runs) where the per-round ratios spread far less.

The test: one log-ratio ``log(c_i / b_i)`` a round (a difference ``c_i − b_i`` when a side has
a value of 0, such as an error rate: no ratio exists), zeros dropped (Wilcoxon's rule, scipy's
default), the rest ranked by size with mid-ranks for ties, and the one-sided p the share of the
2^n equally likely sign flips whose sum of positive ranks is at least the observed one: exact
up to ``EXACT_PAIRS`` pairs, the normal approximation (ties corrected) beyond.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import lru_cache

from perfbench.stats.ranks import midranks

EXACT_PAIRS = 50  # above it the normal approximation is used (scipy's own limit)


def _ratios(base: Sequence[float], cand: Sequence[float]) -> bool:
    return all(v > 0 for v in (*base, *cand))


def differences(base: Sequence[float], cand: Sequence[float]) -> list[float]:
    """One number a pair, positive where the candidate is higher: the log-ratio when every
    value is positive (a change in proportion, like the gate's thresholds), else the
    difference (rates that sit at 0)."""
    if _ratios(base, cand):
        return [math.log(c / b) for b, c in zip(base, cand, strict=True)]
    return [c - b for b, c in zip(base, cand, strict=True)]


def moved(base: Sequence[float], cand: Sequence[float]) -> float:
    """How far the pairs moved the metric, in its unit (+: the candidate higher): the
    baseline's median times the median ratio minus 1, or the median difference."""
    middle = statistics.median(differences(base, cand))
    if _ratios(base, cand):
        return statistics.median(base) * math.expm1(middle)
    return middle


def change(base: Sequence[float], cand: Sequence[float]) -> float | None:
    """``moved`` relative to the baseline's median (None when that is 0): for positive
    values, the median per-round ratio minus 1."""
    scale = abs(statistics.median(base))
    return moved(base, cand) / scale if scale else None


OUTLIER_Z = 3.5  # modified z-score (Iglewicz and Hoaglin) beyond which one pair is left out


def noise(diffs: Sequence[float]) -> float | None:
    """The pairs' spread as one side's run-to-run coefficient of variation: the standard
    deviation of the log-ratios over sqrt(2) (a ratio of two runs with independent CVs c
    spreads by c·sqrt(2)). What the two runs of a round share is not in it. One pair far
    from the others (of four or more; one run's cold cache or burst of load) is left out,
    as compare leaves an outlier run out of the sides' noise: measured, one such round of 8
    lifted P99's noise from 3% to 26%. The test keeps every pair (ranks bound its weight)."""
    kept = list(diffs)
    if len(kept) >= 4:
        middle = statistics.median(kept)
        mad = statistics.median(abs(d - middle) for d in kept)
        far = max(kept, key=lambda d: abs(d - middle))
        if mad and abs(far - middle) / (1.4826 * mad) > OUTLIER_Z:
            kept.remove(far)
    if len(kept) < 2:
        return None
    return statistics.stdev(kept) / math.sqrt(2)


def signed_rank(diffs: Sequence[float]) -> float:
    """One-sided p of Wilcoxon's signed-rank test that ``diffs`` tend to be positive."""
    kept = [d for d in diffs if d != 0]
    n = len(kept)
    if not n:
        return 1.0
    doubled = [round(2 * r) for r in midranks([abs(d) for d in kept])]  # halves → integers
    observed = sum(r for r, d in zip(doubled, kept, strict=True) if d > 0)
    if n > EXACT_PAIRS:
        return _normal_p(doubled, observed)
    ways = _sums(tuple(sorted(doubled)))
    return sum(w for s, w in ways.items() if s >= observed) / float(2**n)


@lru_cache(maxsize=256)
def _sums(doubled: tuple[int, ...]) -> dict[int, int]:
    """Sum of the positive ranks → number of the 2^n sign patterns giving it."""
    ways = {0: 1}
    for r in doubled:
        grown = dict(ways)
        for s, count in ways.items():
            grown[s + r] = grown.get(s + r, 0) + count
        ways = grown
    return ways


def _normal_p(doubled: Sequence[int], observed: int) -> float:
    mean = sum(doubled) / 2
    sd = math.sqrt(sum(r * r for r in doubled) / 4)  # each rank in or out with chance 1/2
    z = (observed - 1 - mean) / sd  # continuity correction of ½ rank (doubled: 1)
    return 0.5 * math.erfc(z / math.sqrt(2))


def smallest_p(pairs: int) -> float:
    """The smallest p ``pairs`` pairs can give: every one the same way, 1 / 2^n."""
    return 0.5**pairs


@lru_cache(maxsize=256)
def critical(pairs: int, alpha: float) -> int:
    """The smallest sum of positive ranks (1…n, no ties) whose exact one-sided p is below
    ``alpha``: n(n+1)/2 + 1, above every attainable sum, when none is."""
    ways = _sums(tuple(2 * r for r in range(1, pairs + 1)))
    tail = 0
    for doubled in sorted(ways, reverse=True):
        if (tail + ways[doubled]) / float(2**pairs) >= alpha:
            return doubled // 2 + 1
        tail += ways[doubled]
    return 0  # alpha above 1: every sum is
