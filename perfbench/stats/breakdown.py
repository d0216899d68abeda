"""Where an agent task's time went, and whether it succeeded.

Per task, its latency split four ways from its steps (times are the sample's own):

- ``model``: the model calls' time on the critical path, the union of their intervals from the
  request leaving to the last byte (overlapping calls count once); ``model_sum`` adds them up.
- ``tool``: the tool calls' time (their union).
- ``client``: the client's own wait before each model call went out (a pooled connection, a
  new connection's handshake), from the steps' ``wait``.
- ``agent``: everything else, the latency outside every step: an agent's start-up, planning
  and glue (a ``cmd:`` agent's interpreter and SDK import are here).

Success is more than completion: a task succeeded when it finished ``ok`` and met its case's
``expect`` (``expect_ok`` not False). Cost per successful task divides everything spent, the
failures' cost too, by the successes: what one success costs.

Pure: ``Breakdown`` is fed from ``stats/summary``'s per-cell group (add, merge, finish); its
figures sit in each scope's metrics as ``time_split`` and ``success``; ``moved`` says which
part of the time changed between two sides (``perfbench compare``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfbench.sample import Sample
from perfbench.stats.distributions import Distributions

PARTS = ("model", "tool", "agent", "client")
NAMES = {"model": "model time", "tool": "tool time", "agent": "the agent's own time",
         "client": "client wait"}  # fmt: skip


def split(s: Sample) -> dict[str, float]:
    """The task's time split, in seconds; ``model_sum`` beside the four parts."""
    return dict(zip(_ORDER, split_tuple(s), strict=True))


_ORDER = ("model", "tool", "agent", "client", "model_sum")


def split_tuple(s: Sample) -> tuple[float, float, float, float, float]:
    """``split`` as a tuple in ``_ORDER``. One pass over the steps, which a task appends as
    they start; steps out of that order (or a model call whose wait reorders it) take the
    sorting path. This runs once per finished task: a dict and two sorts cost three times
    the pass."""
    model = tool = cover = client = model_sum = 0.0
    m_reach = t_reach = c_reach = last = m_last = float("-inf")
    for st in s.steps:
        kind = st.kind
        if kind == "agent":
            continue
        start = st.start
        end = start + st.duration
        if start < last:
            return _sorted_parts(s)
        last = start
        if end > c_reach:
            cover += end - (start if start > c_reach else c_reach)
            c_reach = end
        if kind == "model":
            wait = st.wait
            if wait:
                wait = min(wait, st.duration)
                client += wait
                start += wait
            if start < m_last:
                return _sorted_parts(s)
            m_last = start
            model_sum += end - start
            if end > m_reach:
                model += end - (start if start > m_reach else m_reach)
                m_reach = end
        elif end > t_reach:
            tool += end - (start if start > t_reach else t_reach)
            t_reach = end
    agent = s.end - s.start - cover
    return model, tool, agent if agent > 0 else 0.0, client, model_sum


def _sorted_parts(s: Sample) -> tuple[float, float, float, float, float]:
    model, tools, covered = [], [], []
    model_sum = client = 0.0
    for st in s.steps:
        end = st.start + st.duration
        if st.kind == "model":
            wait = min(st.wait or 0.0, st.duration)
            client += wait
            model.append((st.start + wait, end))
            model_sum += st.duration - wait
            covered.append((st.start, end))
        elif st.kind == "tool":
            tools.append((st.start, end))
            covered.append((st.start, end))
    outside = max(0.0, s.latency - _union(covered))
    return _union(model), _union(tools), outside, client, model_sum


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


_LATENCY = len(_ORDER)  # the successful tasks' latency, after the parts in ``dists``


@dataclass(slots=True)
class Breakdown:
    """One scope's time split (over its successful tasks) and success figures."""

    # The parts in ``_ORDER``, then the latency of the successful tasks: one array while a
    # scope has one task (distributions.py).
    dists: Distributions = field(default_factory=lambda: Distributions(_LATENCY + 1))
    tasks: int = 0
    succeeded: int = 0
    cost: float = 0.0
    priced: int = 0

    def add(self, s: Sample) -> None:
        """A finished task (not a cancelled or dropped one)."""
        self.tasks += 1
        if s.cost is not None:
            self.cost += s.cost
            self.priced += 1
        if s.status != "ok":
            return
        dists = self.dists
        for i, seconds in enumerate(split_tuple(s)):
            dists.add(i, seconds)
        if s.expect_ok is not False:
            self.succeeded += 1
            dists.add(_LATENCY, s.latency)

    def merge(self, other: Breakdown) -> None:
        self.dists.merge(other.dists)
        self.tasks += other.tasks
        self.succeeded += other.succeeded
        self.cost += other.cost
        self.priced += other.priced

    def finish(self) -> dict[str, Any]:
        # Cost per success only when every task was priced: a partial sum would flatter it.
        priced = self.priced == self.tasks and self.priced > 0
        return {
            "time_split": {name: self.dists.summary(i) for i, name in enumerate(_ORDER)},
            "success": {
                "tasks": self.succeeded,
                "rate": self.succeeded / self.tasks if self.tasks else None,
                "cost_per_success": self.cost / self.succeeded
                if priced and self.succeeded
                else None,
                "latency": self.dists.summary(_LATENCY),
            },
        }


def moved(
    baseline: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]
) -> str | None:
    """Which part of a task's time moved between two sides' runs (each run's ``overall``
    metrics): means add up where percentiles do not, so the change of each part's mean (the
    median over a side's runs) is its share of the change of the mean latency. The part that
    carries most of the change is named; None without the figures or without a change."""
    deltas = {}
    for part in PARTS:
        sides = [_median_mean(runs, part) for runs in (baseline, candidate)]
        if sides[0] is None or sides[1] is None:
            return None
        deltas[part] = sides[1] - sides[0]
    total = sum(deltas.values())
    if total == 0:
        return None
    main = max(deltas, key=lambda p: deltas[p] if total > 0 else -deltas[p])
    share = deltas[main] / total
    amount = "all of it" if share >= 0.9 else "most of it" if share >= 0.5 else "most of all"
    return (
        f"mean {total * 1e3:+.0f} ms a task, {amount} {NAMES[main]} ({deltas[main] * 1e3:+.0f} ms)"
    )


def _median_mean(runs: Sequence[Mapping[str, Any]], part: str) -> float | None:
    means = []
    for run in runs:
        distribution = run.get("time_split", {}).get(part)
        if distribution and distribution.get("mean") is not None:
            means.append(distribution["mean"])
    return statistics.median(means) if means else None
