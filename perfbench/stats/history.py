"""Change points over the series of every release: ``perfbench history``'s statistics. Pure.

A pairwise gate compares one change with the one before it, so a drift of 3% a release passes
every time. Teams that gate performance at scale (MongoDB, DataStax) look at the whole series
instead and find where its level shifts, with E-divisive means (Matteson and James; Fleming
et al.'s "Hunter" adds a t-test significance tester that works with a handful of points). That
implementation is Apache Otava's ``otava.analysis.compute_change_points``, used here as it is:
a point's series is each gated metric's median across that run directory's runs.

Otava is an optional dependency (``pip install 'perfbench-llm[history]'``): it is imported
when a history is computed, and its absence is a ``GateError`` that says how to install it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from perfbench.errors import GateError
from perfbench.stats.compare import Metric, Rules

MAX_P = 0.001  # Otava's default: a change point's two sides differ with p below this
# ...and by more than this, relatively: a runner whose load changes over the weeks shifts the
# level of every timing by a percent or two, which is significant over many runs but no news.
MIN_CHANGE = 0.05
Direction = Literal["slower", "faster", "higher", "lower"]


@dataclass(frozen=True)
class Shift:
    """One change point: the series' level moved at point ``index`` (the first run after)."""

    index: int
    run: str
    before: float  # the mean of the segment before it
    after: float  # the mean of the segment from it on
    change: float  # relative: (after − before) / before
    p: float
    direction: Direction
    worse: bool


@dataclass(frozen=True)
class Series:
    metric: str
    unit: str
    runs: tuple[str, ...]
    values: tuple[float | None, ...]  # None: the run has no such figure
    shifts: tuple[Shift, ...]

    @property
    def newest(self) -> Shift | None:
        return self.shifts[-1] if self.shifts else None


@dataclass(frozen=True)
class History:
    series: tuple[Series, ...]
    recent: int  # a regression in the last this many runs fails the gate
    max_p: float
    min_change: float

    @property
    def regressions(self) -> list[tuple[Series, Shift]]:
        """Each metric whose newest change point is for the worse and among the recent runs."""
        first_recent = len(self.series[0].runs) - self.recent if self.series else 0
        return [
            (s, s.newest)
            for s in self.series
            if s.newest is not None and s.newest.worse and s.newest.index >= first_recent
        ]


def _detector() -> Any:
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        raise GateError(
            "perfbench history needs Apache Otava (E-divisive means): "
            "pip install 'perfbench-llm[history]'"
        ) from None
    return compute_change_points


def history(
    runs: Sequence[str],
    overall: Sequence[Mapping[str, Any]],
    rules: Rules,
    recent: int = 6,
    max_p: float = MAX_P,
    min_change: float = MIN_CHANGE,
) -> History:
    """The change points of each gated metric over ``runs`` (in order), whose ``overall`` are
    their summary.json's ``across_runs.overall`` tables."""
    detect = _detector()
    found = []
    for name in rules.gate:
        metric = rules.metric(name)
        values = tuple(_median(o, metric.path) for o in overall)
        if sum(v is not None for v in values) >= 2:
            found.append(_series(metric, tuple(runs), values, detect, max_p, min_change))
    return History(tuple(found), recent, max_p, min_change)


def _median(overall: Mapping[str, Any], path: str) -> float | None:
    cell = overall.get(path)
    value = cell.get("median") if isinstance(cell, Mapping) else None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value)


def _series(
    metric: Metric,
    runs: tuple[str, ...],
    values: tuple[float | None, ...],
    detect: Any,
    max_p: float,
    min_change: float,
) -> Series:
    """Otava on the points that have a value (a run without the figure is skipped, and the
    change point's index mapped back to the run it belongs to)."""
    kept = [i for i, v in enumerate(values) if v is not None]
    points = [values[i] for i in kept]
    shifts: list[Shift] = []
    if len(set(points)) > 1:  # a constant series (no errors ever) has no level to shift
        found, _ = detect(points, window_len=50, max_pvalue=max_p, min_magnitude=min_change)
        shifts = [_shift(metric, runs, kept, cp) for cp in found]
    return Series(metric.name, metric.unit, runs, values, tuple(shifts))


def _shift(metric: Metric, runs: Sequence[str], kept: Sequence[int], point: Any) -> Shift:
    stats = point.stats
    before, after = float(stats.mean_1), float(stats.mean_2)
    change = (after - before) / abs(before) if before else math.inf
    up = after > before
    worse = up == (metric.better == "lower")
    if metric.unit == "s":
        direction: Direction = "slower" if up else "faster"
    else:
        direction = "higher" if up else "lower"
    index = kept[point.index]
    return Shift(index, runs[index], before, after, change, float(stats.pvalue), direction, worse)
