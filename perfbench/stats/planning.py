"""From runs already measured to the runs a comparison needs: the gated metrics' run-level
values, the gate as ``stats.power`` plans it, and the runs a side that every gated timing
needs to show a change (``perfbench plan``, ``run --runs auto``). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfbench.stats import power
from perfbench.stats.compare import Metric, Rules

RATE_UNITS = ("rate", "per task")  # gated on a floor in points, not on a relative change
# What a slowdown moves. Tokens and cost do not, and a run cannot be made long enough to
# show a change below their own thresholds, so they never decide how many runs to make.
TIMINGS = ("p50", "p95", "p99", "mean", "ttft_p50", "ttft_p95", "throughput")


def values(runs: Sequence[Any], path: str) -> list[float]:
    """The value at ``path`` (dotted) of each run's overall metrics, where it is a number."""
    out = []
    for run in runs:
        value: Any = run["overall"]
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(float(value))
    return out


def measured(metric: Metric, groups: Sequence[Sequence[Any]]) -> power.Measured | None:
    """The metric's overall value in every run, one group per run directory; None for a
    rate (gated on a floor) or a metric no run has."""
    if metric.unit in RATE_UNITS:
        return None
    found = tuple(tuple(values(side, metric.path)) for side in groups)
    counts = [int(v) for side in groups for v in values(side, metric.count_path)]
    if not any(found):
        return None
    tasks = min(counts) if counts and metric.quantile is not None else None
    return power.Measured(metric.name, found, metric.threshold, metric.quantile, tasks)


def gated(rules: Rules, groups: Sequence[Sequence[Any]]) -> list[power.Measured]:
    found = (measured(rules.metric(name), groups) for name in rules.gate)
    return [m for m in found if m is not None]


def tested(measures: Sequence[power.Measured]) -> int:
    """The metrics the correction divides alpha among: the gated ones that vary at all."""
    return max(1, len([m for m in measures if (power.pooled_cv(*m.groups) or 0) > 0]))


def gate(rules: Rules, measures: Sequence[power.Measured], chance: float) -> power.Gate:
    """The gate as planned: alpha over the metrics tested (the correction's first step, i.e.
    a change in one metric alone), the rules' noise bar."""
    return power.Gate(rules.alpha / tested(measures), rules.noise_k, power=chance)


@dataclass(frozen=True)
class Enough:
    """How many runs a side let compare see a slowdown of ``effect`` that moves every gated
    timing, at their noise now: ``runs`` is what the cheapest timing needs (``metric``, at
    run-to-run ``cv``), as ``perfbench plan``'s "Cheapest" line. ``hardest``: the reachable
    timing that needs the most runs (a change in it alone needs that many); ``unreachable``:
    timings that no number of runs lets show it (their noise bar, a multiple of the CV, is at
    or above the effect; more tasks a run lower it), with their CVs; ``considered``: how many
    timings could be flagged at all (a change within a metric's own threshold never is)."""

    runs: int
    metric: str | None = None
    cv: float | None = None
    hardest: tuple[str, int] | None = None
    unreachable: tuple[tuple[str, float], ...] = ()
    considered: int = 0


def runs_for(
    measures: Sequence[power.Measured], effect: float, chance: float, rules: Rules
) -> Enough:
    """Runs a side at the present ``--repeat`` for the gated timings to show a slowdown of
    ``effect``: the cheapest one's (with spread: a timing without any is no evidence)."""
    plan_gate = gate(rules, measures, chance)
    reachable: list[tuple[int, float, str]] = []
    unreachable: list[tuple[str, float]] = []
    considered = 0
    for m in measures:
        cv = power.pooled_cv(*m.groups)
        if m.metric not in TIMINGS or not cv or effect <= m.threshold:
            continue  # within its threshold: never flagged, whatever the runs
        considered += 1
        runs = power.runs_needed(effect, cv, replace(plan_gate, threshold=m.threshold))
        if runs is None:
            unreachable.append((m.metric, cv))
        else:
            reachable.append((runs, -cv, m.metric))
    if not reachable:
        return Enough(power.fewest_runs(plan_gate.alpha), None, None, None,
                      tuple(unreachable), considered)  # fmt: skip
    runs, cv, metric = min(reachable)
    top = max(reachable)
    return Enough(runs, metric, -cv, (top[2], top[0]), tuple(unreachable), considered)


@dataclass(frozen=True)
class Wanted:
    """``run --runs auto``: runs until compare can see ``effect`` in every gated timing (with
    the chance ``chance``, under ``rules``), at most ``max_runs``."""

    effect: float
    max_runs: int
    rules: Rules
    chance: float = power.POWER


@dataclass(frozen=True)
class Verdict:
    """Where a ``--runs auto`` run stands: ``runs`` made, ``more`` to make next (None: stop),
    ``enough`` what the gated timings need now, and ``detectable`` the smallest change the
    limiting metric lets these runs see (None when unknown)."""

    runs: int
    more: int | None
    enough: Enough
    detectable: float | None

    @property
    def reached(self) -> bool:
        return self.enough.metric is not None and self.runs >= self.enough.runs

    def to_doc(self, wanted: Wanted) -> dict[str, Any]:
        return {
            "detect": wanted.effect,
            "max_runs": wanted.max_runs,
            "runs": self.runs,
            "needed": self.enough.runs if self.enough.metric else None,
            "metric": self.enough.metric,
            "cv": self.enough.cv,
            "reached": self.reached,
            "detectable": self.detectable,
            "hardest": list(self.enough.hardest) if self.enough.hardest else None,
            "unreachable": [{"metric": m, "cv": cv} for m, cv in self.enough.unreachable],
            "considered": self.enough.considered,
        }


def next_runs(summary: Any, wanted: Wanted) -> Verdict:
    """After a batch of runs: how many runs the run should have next, from its own noise.
    Straight to the estimate (capped); the next batch measures the noise again. Timings whose
    noise bar is at or above the effect do not add runs (more runs average the medians, not
    the CV): the verdict names them."""
    runs = list(summary.get("runs") or [])
    measures = gated(wanted.rules, [runs])
    enough = runs_for(measures, wanted.effect, wanted.chance, wanted.rules)
    goal = min(enough.runs, wanted.max_runs) if enough.metric else len(runs)
    detectable = None
    if enough.metric is not None and enough.cv is not None:
        plan_gate = gate(wanted.rules, measures, wanted.chance)
        threshold = wanted.rules.metric(enough.metric).threshold
        detectable = power.detectable(
            enough.cv, (len(runs), len(runs)), replace(plan_gate, threshold=threshold)
        )
    return Verdict(len(runs), goal if goal > len(runs) else None, enough, detectable)
