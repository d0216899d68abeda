"""MLPerf's early-stopping rule: the tail percentile a run of *n* values can claim at 99%
confidence, and how many values a claim needs. Pure.

A run's raw P99 of 100 values is its second-largest value, and by chance alone it often sits
below the system's true P99. MLPerf Inference's LoadGen (``loadgen/early_stopping.cc`` and
``results.cc``) corrects for that: with *n* values, let *t* be the largest count of values
allowed above the true P-th percentile such that seeing at most *t* of them has a chance
≤ 1 − confidence under the binomial law (``P(Binomial(n, 1 − P/100) ≤ t) ≤ 0.01``). The
*t*-th largest value is then an upper bound of the true percentile at that confidence: the
*early-stopping estimate*. It is always at or above the raw percentile; with too few values
(*t* < 1: fewer than 662 values for P99, 130 for P95, 64 for P90) no estimate exists.

The sample-size table of MLPerf's rules (``inference_rules.adoc``: 24,576 / 57,344 / 270,336
queries for P90 / P95 / P99 at 99% confidence, margins 0.50% / 0.25% / 0.05%) is the normal
approximation ``z² · p(1 − p) / margin²`` rounded up to a multiple of 2^13: ``sample_size``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfbench.stats.histogram import Histogram

CONFIDENCE = 0.99  # MLPerf's, for every early-stopping estimate
TAILS = (90.0, 95.0, 99.0)  # the percentiles a summary gives an estimate of
# MLPerf's table: the margin of error each tail percentile is estimated to (inference_rules.adoc)
MARGINS = {90.0: 0.005, 95.0: 0.0025, 97.0: 0.0015, 99.0: 0.0005}
ROUNDING = 2**13  # the table's "Rounded Inferences" are multiples of 8,192
_SPAN_SD = 40.0  # binomial terms further than this below the mean are < 1e-300 of the sum


@functools.lru_cache(maxsize=4096)  # a scope per case: the same counts recur
def allowance(n: int, percentile: float, confidence: float = CONFIDENCE) -> int:
    """The largest *t* with ``P(Binomial(n, 1 − percentile/100) ≤ t) ≤ 1 − confidence``;
    −1 when even none above the percentile is that unlikely (too few values)."""
    if n <= 0:
        return -1
    q = 1.0 - percentile / 100.0
    bound = math.log(1.0 - confidence)
    # Start where the terms stop being negligible: summing from 0 would take n·q steps of
    # terms that underflow anyway (a million values at P90).
    sd = math.sqrt(n * q * (1.0 - q))
    k = max(0, math.floor(n * q - _SPAN_SD * sd))
    log_term = _log_pmf(n, k, q)
    log_cdf = log_term
    while log_cdf <= bound:
        if k >= n:
            return n
        log_term += math.log((n - k) / (k + 1)) + math.log(q / (1.0 - q))
        k += 1
        log_cdf = _log_add(log_cdf, log_term)
    return k - 1


def _log_pmf(n: int, k: int, q: float) -> float:
    choose = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return choose + k * math.log(q) + (n - k) * math.log1p(-q)


def _log_add(a: float, b: float) -> float:
    high, low = max(a, b), min(a, b)
    return high + math.log1p(math.exp(low - high))


@functools.lru_cache(maxsize=4096)  # a scope per case: the same counts recur
def min_count(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values for which an early-stopping estimate of ``percentile`` exists."""
    low, high = 1, 1
    while allowance(high, percentile, confidence) < 1:
        low, high = high, high * 2
    while low < high:  # the smallest n with allowance(n) >= 1 in (low, high]
        mid = (low + high) // 2
        if allowance(mid, percentile, confidence) >= 1:
            high = mid
        else:
            low = mid + 1
    return high


@functools.lru_cache(maxsize=4096)  # a scope per case: the same counts recur
def claimable(n: int, confidence: float = CONFIDENCE) -> float | None:
    """The highest percentile (down to 0.1) that ``n`` values back by this rule, their
    largest value bounding it: what a run too small for a P99 can claim. None below 2."""
    if allowance(n, 0.05, confidence) < 1:
        return None
    low, high = 0.05, 100.0  # allowance >= 1 at low, < 1 at high
    for _ in range(40):
        mid = (low + high) / 2
        if allowance(n, mid, confidence) >= 1:
            low = mid
        else:
            high = mid
    return math.floor(low * 10) / 10


def rank_percentile(n: int, t: int) -> float:
    """The nearest-rank percentile whose value is the ``t``-th largest of ``n``: what to ask a
    histogram for (``Histogram.percentiles``) to read the estimate."""
    return 100.0 * (n - t + 1) / n


@dataclass(frozen=True)
class Estimate:
    percentile: float
    n: int
    largest: int  # the estimate is the n-th largest value (0: too few values)
    needs: int  # the fewest values an estimate needs

    @property
    def available(self) -> bool:
        return self.largest >= 1


def plan(n: int, percentile: float, confidence: float = CONFIDENCE) -> Estimate:
    """Which value of a run of ``n`` is its early-stopping estimate of ``percentile``."""
    t = allowance(n, percentile, confidence)
    return Estimate(percentile, n, max(0, t), min_count(percentile, confidence))


def sample_size(percentile: float, margin: float, confidence: float = CONFIDENCE) -> int:
    """MLPerf's table: the values to estimate ``percentile`` within ``margin`` (a fraction)
    at ``confidence``, by the normal approximation (262,742 for P99, before ``rounded``)."""
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = percentile / 100.0
    return round(z * z * p * (1.0 - p) / (margin * margin))  # the table rounds (50,425.2)


def rounded(count: int) -> int:
    """Up to the table's multiple of 2^13 (262,742 → 270,336)."""
    return math.ceil(count / ROUNDING) * ROUNDING


def estimate(hist: Histogram | None, percentile: float) -> dict[str, Any]:
    """The early-stopping estimate of ``percentile`` over ``hist``: its value (None with too
    few values), the rank it was read at from the top, the values an estimate needs, and
    without one the percentile the values do back (``claimable``, bounded by their largest)."""
    n = hist.count if hist is not None else 0
    found = plan(n, percentile)
    out: dict[str, Any] = {
        "confidence": CONFIDENCE,
        "value": None,
        "largest": found.largest,
        "needs": found.needs,
    }
    if hist is not None and found.available:
        at = rank_percentile(n, found.largest)
        out["value"] = hist.percentiles([at])[at]
    elif hist is not None and n:
        out["claimable"] = claimable(n)
        out["claimable_value"] = hist.max
    return out


def tails(hist: Histogram) -> dict[str, float | None]:
    """``{"p90": …, "p95": …, "p99": …}``: each estimate's value (None: too few values);
    and while the P99 has none, ``claimable``: the highest percentile the values back (their
    largest bounds it), so that a small run still says what it can claim."""
    n = hist.count
    ats = {p: rank_percentile(n, t) for p in TAILS if (t := allowance(n, p)) >= 1}
    values = hist.percentiles(ats.values()) if ats else {}
    out = {f"p{p:g}": values[ats[p]] if p in ats else None for p in TAILS}
    if out["p99"] is None:
        out["claimable"] = claimable(n)
    return out


@dataclass(frozen=True)
class Claim:
    """What one side's values, every run pooled, claim of a tail percentile at
    ``CONFIDENCE``: the early-stopping estimate beside the raw percentile; without one (too
    few values), how many it needs and the lower percentile the values do back, bounded by
    their largest (``claimable``)."""

    percentile: float
    n: int
    raw: float | None
    value: float | None  # the early-stopping estimate; None: fewer values than ``needs``
    needs: int
    backs: float | None = None  # without a value: the highest percentile the values back
    largest: float | None = None  # …which their largest value bounds


def claim(scope: Mapping[str, Any], figure: str, percentile: float) -> Claim | None:
    """``figure``'s claim (``latency``, ``ttft``…) in a pooled scope of ``summary.json``; None
    where the summary kept no estimate of it (written before estimates were, or no values)."""
    stored = (scope.get("early_stopping") or {}).get(figure)
    dist = scope.get(figure) or {}
    n = int(dist.get("n") or 0)
    if stored is None or not n or percentile not in TAILS:
        return None
    value = stored.get(f"p{percentile:g}")
    found = Claim(percentile, n, dist.get(f"p{percentile:g}"), value, min_count(percentile))
    if value is not None:
        return found
    return replace(found, backs=claimable(n), largest=dist.get("max"))


@dataclass(frozen=True)
class RowClaims:
    """Both sides' claims of the tail percentile a comparison row (``metric``) rests on."""

    metric: str
    baseline: Claim | None
    candidate: Claim | None


_TAIL_PATH = re.compile(r"(\w+)\.p(\d+(?:\.\d+)?)")


def row_claims(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], paths: Mapping[str, str]
) -> list[RowClaims]:
    """For each comparison metric (name → its path in a run's metrics, ``latency.p99``) that
    is a tail percentile with a stored estimate, each side's claim over its pooled runs."""
    sides = [(s.get("pooled") or {}).get("overall") or {} for s in (baseline, candidate)]
    out = []
    for name, path in paths.items():
        match = _TAIL_PATH.fullmatch(path)
        if match is None or float(match.group(2)) not in TAILS:
            continue
        base, cand = (claim(s, match.group(1), float(match.group(2))) for s in sides)
        if base is not None or cand is not None:
            out.append(RowClaims(name, base, cand))
    return out
