"""What a run is: the plan of passes and load that the engine carries out."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from perfbench.load import Adaptive, Load, Rate
from perfbench.sample import Phase
from perfbench.stats.knee import StopRule

AUTO_RAMP_PER_SLOT = 0.001  # seconds between two slot starts in one worker process


@dataclass(frozen=True)
class Plan:
    runs: int = 5
    warmup: int = 1
    repeat: int = 1
    concurrency: int = 1  # the fixed closed-loop shape, used when ``load`` is None
    seed: int = 0
    load: Load | None = None
    workers: int = 1  # processes sharing the load (perfbench.engine.fleet); 1 = this process
    # Closed loop: seconds over which the task slots of a pass start, evenly; None = auto
    # (ramp_seconds). All at once, the slots' tasks finish together and restart together for
    # the whole pass: each wave of completions queues in the client and is timed late.
    ramp_up: float | None = 0.0

    def connections(self) -> int:
        """Connections a target's client must keep so that no task waits on its pool: the
        most tasks that can be in flight (0: no limit, an open loop without a cap)."""
        if isinstance(self.load, Adaptive):
            return self.load.maximum
        if isinstance(self.load, Rate):
            return self.load.max_in_flight or 0
        return self.concurrency

    def ramp_seconds(self) -> float:
        """The ramp in seconds; auto starts one slot per millisecond in each worker process,
        slower than one worker gets through tasks (0.25–0.4 ms of CPU each, `perfbench
        calibrate`), so a pass's completions come back spread out rather than in waves."""
        if self.ramp_up is not None:
            return self.ramp_up
        if self.load is not None or self.concurrency <= 1:
            return 0.0
        return AUTO_RAMP_PER_SLOT * self.concurrency / max(1, self.workers)

    def passes(self) -> list[tuple[Phase, int]]:
        warm: list[tuple[Phase, int]] = [("warmup", i) for i in range(self.warmup)]
        return warm + [("measured", i) for i in range(self.runs)]


def auto_workers(plan: Plan, cpus: int | None = None) -> int:
    """``--workers auto``: one worker per 128 tasks in flight (or per 1,000 open-loop tasks/s),
    at most one per core. One worker handles far more than either on this client stack; more
    would only add start-up time and pass barriers."""
    cpus = cpus or os.cpu_count() or 1
    if isinstance(plan.load, Adaptive):
        return 1
    if isinstance(plan.load, Rate):
        wanted = math.ceil(plan.load.per_second / 1000)
    else:
        wanted = math.ceil(plan.concurrency / 128)
    return max(1, min(cpus, wanted))


@dataclass(frozen=True)
class SweepPlan:
    base: Plan  # runs, warmup, repeat, seed for every level
    levels: tuple[float, ...] = ()  # explicit levels; empty means doubling (auto)
    rates: bool = False  # levels are tasks/s (open loop) rather than concurrency
    max_level: float = 1024
    rule: StopRule = field(default_factory=StopRule)
    bisect_steps: int = 4
    slo: tuple[str, float] | None = None  # ("p95", 2.0)
    workers: int = 0  # processes per level; 0: chosen per level (workers.auto_workers)


def plan_doc(plan: SweepPlan) -> dict[str, Any]:
    """The plan as JSON, for sweep-plan.json."""
    doc = asdict(plan)
    doc["base"].pop("load", None)  # a level's load is derived from the level
    return doc


def plan_from_doc(doc: dict[str, Any]) -> SweepPlan:
    return SweepPlan(
        base=Plan(**doc["base"]),
        levels=tuple(doc["levels"]),
        rates=doc["rates"],
        max_level=doc["max_level"],
        rule=StopRule(**doc["rule"]),
        bisect_steps=doc["bisect_steps"],
        slo=(doc["slo"][0], doc["slo"][1]) if doc["slo"] else None,
        workers=doc.get("workers", 0),  # absent from sweeps started before workers existed
    )
