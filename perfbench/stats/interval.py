"""The interval that goes with the gate's test: the Hodges-Lehmann (Moses) interval of the
shift between two sides' run-level values, for the report's change-per-metric chart. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist


def shift_interval(
    base: Sequence[float], cand: Sequence[float], alpha: float
) -> tuple[float, float]:
    """The Hodges-Lehmann (Moses) interval of the shift candidate − baseline over run-level
    values, the interval that goes with the Mann-Whitney test the gate runs: the C-th smallest
    and C-th largest of the pairwise differences, C the largest count with P(U < C) ≤ alpha
    under the test's exact null, so each bound is one-sided at alpha (a 1 − 2·alpha interval).
    With too few runs for that level (2 a side), C = 1: the full range of the differences."""
    diffs = sorted(c - b for c in cand for b in base)
    if not diffs:
        return math.nan, math.nan
    k = max(1, lower_count(len(base), len(cand), alpha))
    return diffs[k - 1], diffs[-k]


def lower_count(n: int, m: int, alpha: float) -> int:
    """The largest C with P(U < C) ≤ alpha for the Mann-Whitney U of ``n`` and ``m`` values
    without ties (exact up to 40 values together, then the normal approximation)."""
    if n + m > 40:
        z = NormalDist().inv_cdf(1 - alpha)
        mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        return max(0, math.floor(mean - z * sd))
    counts = _u_counts(min(n, m), max(n, m))
    total = math.comb(n + m, n)
    below = 0
    for c, ways in enumerate(counts):
        if (below + ways) / total > alpha:
            return c
        below += ways
    return len(counts)


@lru_cache(maxsize=64)
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many of the C(n+m, n) orderings give U = 0, 1, …, n·m: the coefficients of the
    Gaussian binomial, by the recurrence f(i, j) = q^j · f(i − 1, j) + f(i, j − 1)."""
    previous = [[1] for _ in range(m + 1)]  # f(0, j) = 1
    for i in range(1, n + 1):
        row = [[1]]  # f(i, 0) = 1
        for j in range(1, m + 1):
            out = [0] * (i * j + 1)
            for u, ways in enumerate(previous[j]):
                out[u + j] += ways
            for u, ways in enumerate(row[j - 1]):
                out[u] += ways
            row.append(out)
        previous = row
    return tuple(previous[m])
