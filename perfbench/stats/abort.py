"""``run --abort-on "error_rate>5%,p95>2s"``: limits that stop a run while it works, as k6's
``abortOnFail`` does, so that a run against a failing paid API stops spending. Each limit is
written as the condition that aborts (the threshold grammar of stats/thresholds.py, with > or
>=) and is checked on the measured tasks finished so far, once ``grace_s`` seconds of measured
time have passed and at least ``min_tasks`` have finished (k6's ``delayAbortEval``): a first
failure, or the first slow task, is not yet a rate. Pure: figures in, the crossed limit out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from perfbench.errors import GateError
from perfbench.stats.thresholds import Threshold, parse_threshold

METRICS = ("error_rate", "p50", "p95", "p99")
GRACE_S = 10.0
MIN_TASKS = 10


@dataclass(frozen=True)
class AbortOn:
    limits: tuple[Threshold, ...]
    grace_s: float = GRACE_S
    min_tasks: int = MIN_TASKS

    def crossed(
        self, figures: Mapping[str, float | None], measured_s: float, tasks: int
    ) -> Threshold | None:
        """The first limit the figures cross, once the grace period is over; else None."""
        if measured_s < self.grace_s or tasks < self.min_tasks:
            return None
        for limit in self.limits:
            value = figures.get(limit.metric)
            if value is None:
                continue
            if value > limit.limit or (limit.op == ">=" and value == limit.limit):
                return limit
        return None


def parse(text: str, grace_s: float = GRACE_S) -> AbortOn:
    """``error_rate>5%,p95>2s``: each limit is a metric of METRICS, > or >=, and a value."""
    limits = []
    for part in (p for p in text.split(",") if p.strip()):
        try:
            limit = parse_threshold(part)
        except GateError as exc:
            raise GateError(f"--abort-on: {exc}") from None
        if limit.metric not in METRICS or limit.op not in (">", ">=") or limit.scope != "overall":
            raise GateError(
                f"--abort-on '{part.strip()}': write the condition that stops the run, "
                f"METRIC>VALUE, with a metric of {', '.join(METRICS)} (as in error_rate>5%, "
                "p95>2s)"
            )
        limits.append(limit)
    if not limits:
        raise GateError("--abort-on: no limit given (as in 'error_rate>5%,p95>2s')")
    return AbortOn(tuple(limits), grace_s)


def describe(limit: Threshold, value: float) -> str:
    """``error_rate>20% (was 48.0%)``: the limit and the figure that crossed it."""
    shown = f"{value:.1%}" if limit.metric == "error_rate" else f"{value * 1e3:.1f} ms"
    return f"{limit.text} (was {shown})"


def figures(done: int, ok: int, latency: Mapping[float, float]) -> dict[str, float | None]:
    """The figures the limits read: error rate over the measured tasks, and the percentiles
    of the successful ones (``latency``: percentile -> seconds)."""
    return {
        "error_rate": (done - ok) / done if done else None,
        **{f"p{int(p)}": latency.get(p) for p in (50.0, 95.0, 99.0)},
    }


PERCENTILES: Sequence[float] = (50.0, 95.0, 99.0)
