"""Reading a sweep: where the target stops scaling. Pure functions over per-level figures.

- stop conditions while doubling: 429s or errors above a budget, P95 above k × its value at the
  lowest level, or less than ``min_gain`` more throughput from doubling; each has a kind, so
  the knee it bounds is named for what ended the growth (a rate-limit knee is the provider's
  limit, not the target's capacity);
- the Kneedle knee of throughput against log2(level);
- a Universal Scalability Law fit, X(N) = λN / (1 + σ(N−1) + κN(N−1)), with N* = √((1−σ)/κ),
  fitted by least squares on N/X, which is linear in (1/λ, σ/λ, κ/λ); below ``USL_MIN_R2`` its
  N* is not to be trusted (reports say so);
- Little's law per level: tasks in flight ≈ throughput × mean latency; a closed-loop level that
  did not keep its N tasks in flight was limited by the client, not the target.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfbench.stats import presets

StopKind = Literal["rate-limit", "errors", "latency", "throughput"]
USL_MIN_R2 = 0.9  # below it the USL curve misses the measured points: its N* is a guess


@dataclass(frozen=True)
class Level:
    level: float  # concurrency, or tasks/s for a rate sweep
    throughput: float  # successful tasks/s (median across runs)
    p50: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    error_rate: float  # failed tasks / tasks
    throttle_rate: float  # 429s / tasks
    tasks: float = 0.0  # tasks per run (median)
    goodput: float | None = None  # share of tasks meeting every --slo objective (median)
    # --slo a preset (mlperf:…): every objective met at its percentile, runs pooled
    preset_met: bool | None = None
    # Tasks ok and as their case expects / tasks (median): under load, whether they still
    # succeed, not only complete (stats/breakdown.py). None: a summary without it.
    success_rate: float | None = None


@dataclass(frozen=True)
class StopRule:
    error_budget: float = 0.01
    p95_factor: float = 3.0
    min_gain: float = 0.10


@dataclass(frozen=True)
class Stop:
    """Why a level ends the doubling: what kind of limit, and the sentence that says so."""

    kind: StopKind
    reason: str


def stop(levels: list[Level], rule: StopRule) -> Stop | None:
    """Why the newest level ends the doubling, or None if the sweep may go on."""
    last = levels[-1]
    throttled = last.throttle_rate > rule.error_budget
    failed = last.error_rate > rule.error_budget
    if throttled:  # 429s first: the failures that come with them are refusals
        also = f", and errors at {last.error_rate:.1%}" if failed else ""
        return Stop(
            "rate-limit",
            f"429 answers at {last.throttle_rate:.2f} per task "
            f"(budget {rule.error_budget:g}){also}",
        )
    if failed:
        return Stop("errors", f"errors at {last.error_rate:.1%} (budget {rule.error_budget:.0%})")
    base = levels[0].p95
    if base and last.p95 and last.p95 > rule.p95_factor * base:
        return Stop(
            "latency", f"P95 {last.p95:.3f} s is over {rule.p95_factor:g}× the lowest level's"
        )
    if len(levels) >= 2:
        before = levels[-2]
        if before.level * 2 == last.level:  # a doubling step: it must pay off
            if before.throughput > 0 and last.throughput < before.throughput * (1 + rule.min_gain):
                return Stop(
                    "throughput", f"throughput gained under {rule.min_gain:.0%} from doubling"
                )
        else:  # a bisection step between doublings: it must at least not lose throughput
            best = max(v.throughput for v in levels[:-1])
            if last.throughput < best * (1 - rule.min_gain):
                return Stop(
                    "throughput",
                    f"throughput fell over {rule.min_gain:.0%} below {best:.2f} tasks/s",
                )
    return None


def verdict(levels: list[Level], rule: StopRule) -> str | None:
    """The sentence of ``stop``: why the newest level ends the doubling, or None."""
    found = stop(levels, rule)
    return None if found is None else found.reason


def bisect(good: float, bad: float) -> float | None:
    """The next level between a good and a bad one (whole numbers), or None when adjacent."""
    mid = math.floor((good + bad) / 2)
    return float(mid) if good < mid < bad else None


def kneedle(levels: list[Level]) -> float | None:
    """The Kneedle knee of throughput against log2(level) (concave, increasing)."""
    if len(levels) < 3:
        return None
    xs = [math.log2(v.level) for v in levels]
    ys = [v.throughput for v in levels]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if x1 == x0 or y1 == y0:
        return None
    diff = [(y - y0) / (y1 - y0) - (x - x0) / (x1 - x0) for x, y in zip(xs, ys, strict=True)]
    best = max(range(len(diff)), key=diff.__getitem__)
    return levels[best].level if diff[best] > 0 else None


@dataclass(frozen=True)
class UslFit:
    lam: float  # throughput of one task in flight
    sigma: float  # contention
    kappa: float  # coherency
    n_star: float | None  # the level of peak throughput (None without coherency cost)
    r2: float  # of the fitted throughput against the measured


def usl(levels: list[Level]) -> UslFit | None:
    """Least-squares USL fit; needs 6 or more levels with throughput."""
    points = [(v.level, v.throughput) for v in levels if v.throughput > 0]
    if len(points) < 6:
        return None
    rows = [(1.0, n - 1.0, n * (n - 1.0)) for n, _ in points]
    targets = [n / x for n, x in points]
    coef = _least_squares(rows, targets)
    if coef is None or coef[0] <= 0:
        return None
    a, b, c = coef
    lam, sigma, kappa = 1 / a, max(0.0, b / a), max(0.0, c / a)
    n_star = math.sqrt((1 - sigma) / kappa) if kappa > 0 and sigma < 1 else None
    fitted = [lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1)) for n, _ in points]
    measured = [x for _, x in points]
    mean = sum(measured) / len(measured)
    total = sum((x - mean) ** 2 for x in measured)
    residual = sum((x - f) ** 2 for x, f in zip(measured, fitted, strict=True))
    return UslFit(lam, sigma, kappa, n_star, 1 - residual / total if total else 1.0)


def _least_squares(rows: list[tuple[float, float, float]], y: list[float]) -> list[float] | None:
    """Solve the 3×3 normal equations by Gaussian elimination with partial pivoting."""
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    v = [sum(r[i] * t for r, t in zip(rows, y, strict=True)) for i in range(3)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        v[col], v[pivot] = v[pivot], v[col]
        for r in range(col + 1, 3):
            f = m[r][col] / m[col][col]
            m[r] = [a - f * b for a, b in zip(m[r], m[col], strict=True)]
            v[r] -= f * v[col]
    out = [0.0, 0.0, 0.0]
    for i in (2, 1, 0):
        out[i] = (v[i] - sum(m[i][j] * out[j] for j in range(i + 1, 3))) / m[i][i]
    return out


def in_flight(level: Level) -> float | None:
    """Little's law: the mean number of tasks in flight the level actually sustained."""
    return level.throughput * level.mean if level.mean is not None else None


def client_bound(level: Level, tolerance: float = 0.85) -> bool:
    """A closed-loop level whose sustained in-flight count fell well short of its N. Judged on
    clean levels only (throughput and mean latency count successful tasks, so fast failures
    would make a full pipeline look empty) with at least 4 tasks per worker (the last, partial
    round of a short run lowers the mean in flight by itself)."""
    if level.error_rate or level.throttle_rate or level.tasks < 4 * level.level:
        return False
    sustained = in_flight(level)
    return sustained is not None and sustained < tolerance * level.level


PERCENTILES = ("p50", "p95", "p99", "mean")  # the Level fields a percentile --slo names


def slo_max(levels: list[Level], metric: str, limit: float) -> float | None:
    """The largest level whose ``metric`` (p50, p95, p99 or mean) is under ``limit`` seconds;
    or, for goodput objectives (``metric`` is their text), whose share of tasks meeting them
    reaches ``limit`` (DistServe's SLO attainment; a failed task misses); for a preset's name,
    whose every objective held at the preset's percentile (``limit`` unused)."""
    if metric in PERCENTILES:
        ok = [v.level for v in levels if (getattr(v, metric) or math.inf) < limit]
    elif presets.is_preset_name(metric):  # as MLPerf's search: each objective at its P99
        ok = [v.level for v in levels if v.preset_met]
    else:
        ok = [v.level for v in levels if v.goodput is not None and v.goodput >= limit]
    return max(ok) if ok else None


def level_of(level: float, summary: Mapping[str, Any]) -> Level:
    """A level's figures from its run's summary: medians across its runs."""
    overall = summary["across_runs"]["overall"]

    def med(key: str) -> float | None:
        entry = overall.get(key)
        return None if entry is None else float(entry["median"])

    return Level(
        level=level,
        throughput=med("throughput") or 0.0,
        p50=med("latency.p50"),
        p95=med("latency.p95"),
        p99=med("latency.p99"),
        mean=med("latency.mean"),
        error_rate=med("error_rate") or 0.0,
        throttle_rate=med("throttle_rate") or 0.0,
        tasks=med("tasks") or 0.0,
        goodput=med("goodput.task_share"),
        preset_met=_preset_met(summary),
        success_rate=med("success.rate"),
    )


def _preset_met(summary: Mapping[str, Any]) -> bool | None:
    checks = ((summary.get("pooled") or {}).get("overall", {}).get("goodput") or {}).get(
        "objectives"
    )
    return all(c["met"] for c in checks) if checks else None


def analyse(
    levels: list[Level],
    reasons: Mapping[float, str | None],
    *,
    rates: bool,
    slo: tuple[str, float] | None,
    kinds: Mapping[float, StopKind | None] | None = None,
    rule: StopRule | None = None,
) -> dict[str, Any]:
    """A sweep's findings from its levels, why each stopped the doubling (None: it did not)
    and the kind of each stop: sweep.json's ``findings``."""
    kinds = kinds or {}
    good = [v for v in levels if reasons.get(v.level) is None]
    bad = [v for v in levels if reasons.get(v.level) is not None]
    fit = usl(levels)
    limited = [v.level for v in levels if not rates and client_bound(v)]
    knee = max((v.level for v in good), default=None) if bad else None
    kind = knee_kind(knee, [v.level for v in bad], kinds)
    at_knee = next((v.throughput for v in levels if v.level == knee), None)
    return {
        "knee": knee,  # the largest level before a stop condition (after bisection)
        "knee_kind": kind,
        "stopped_by": {str(v.level): reasons[v.level] for v in bad},
        "stop_kinds": {str(v.level): kinds.get(v.level) for v in bad},
        "knee_throughput": at_knee,
        # A plateau only where throughput stopped growing: a knee ended by 429s, errors or
        # latency may sit below a level that completed more (its 429s retried).
        "plateau_throughput": at_knee if kind == "throughput" else None,
        "beyond_knee": beyond(levels, knee, rule),
        "kneedle": kneedle(levels),
        "usl": asdict(fit) if fit else None,
        "usl_reliable": None if fit is None else fit.r2 >= USL_MIN_R2,
        "slo_max_level": slo_max(levels, *slo) if slo else None,
        "in_flight": {str(v.level): in_flight(v) for v in levels},
        "client_bound_levels": limited,
    }


def beyond(
    levels: list[Level], knee: float | None, rule: StopRule | None = None
) -> dict[str, float] | None:
    """The level above the knee that completed the most tasks/s, when its tasks succeeded
    (429s retried; failures within the error budget) and it beat the knee by more than the
    rule's ``min_gain``: throughput was then still growing past the knee."""
    rule = rule or StopRule()
    at_knee = next((v for v in levels if v.level == knee), None)
    if at_knee is None:
        return None
    above = [v for v in levels if v.level > at_knee.level and v.error_rate <= rule.error_budget]
    best = max(above, key=lambda v: v.throughput, default=None)
    if best is None or best.throughput <= at_knee.throughput * (1 + rule.min_gain):
        return None
    return {"level": best.level, "throughput": best.throughput, "throttle_rate": best.throttle_rate}


def knee_kind(
    knee: float | None, bad: list[float], kinds: Mapping[float, StopKind | None]
) -> StopKind | None:
    """What ended the growth at the knee: the stop of the nearest bad level above it (the one
    bisection closed in on), else of the lowest bad level."""
    if knee is None or not bad:
        return None
    above = [level for level in bad if level > knee]
    return kinds.get(min(above or bad))
