"""Ramping stages (``run --stages "30s:8,60s:32,30s:0"``, k6's ramping-VUs ``stages``): the
closed loop's target concurrency over a measured run, moving linearly from the last stage's
target (0 at the start) to each stage's over its duration. Task slot k works while the target
is above k; a slot the ramp-down leaves finishes its task first (k6's graceful ramp-down).

Targets in tasks per second (``"30s:5/s,60s:20/s"``, k6's ramping-arrival-rate) make an open
loop instead: the rate moves linearly the same way, and a task starts each time the arrivals
due so far (the rate's integral) reach a whole number. Pure: stages in, targets and times out."""

from __future__ import annotations

import math
import re

from perfbench.errors import GateError
from perfbench.load import Rate

Stages = tuple[tuple[float, int], ...]  # (seconds, target concurrency at its end)

_STAGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*:\s*(\d+)\s*$")
_SCALE = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_RATE_STAGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*:\s*(\d+(?:\.\d+)?)\s*/s\s*$")
RateStages = tuple[tuple[float, float], ...]  # (seconds, tasks per second at its end)


def parse(text: str) -> Stages:
    """``30s:8,60s:32,30s:0``: each stage a duration (ms, s, m, h; s when bare) and a target."""
    stages = []
    for part in text.split(","):
        match = _STAGE.match(part)
        if not match:
            raise GateError(
                f"--stages: '{part.strip()}' is not DURATION:TARGET; write stages as "
                "'30s:8,60s:32,30s:0' (ramp to 8 in 30 s, to 32 in 60 s, down to 0 in 30 s)"
            )
        seconds = float(match.group(1)) * _SCALE[match.group(2) or "s"]
        stages.append((seconds, int(match.group(3))))
    if sum(s for s, _ in stages) <= 0 or max(t for _, t in stages) < 1:
        raise GateError("--stages: the stages must last some time and reach a target of 1+")
    return tuple(stages)


def total(stages: Stages) -> float:
    return sum(seconds for seconds, _ in stages)


def peak(stages: Stages) -> int:
    return max(target for _, target in stages)


def target(stages: Stages, at: float) -> float:
    """The target concurrency ``at`` seconds into the run (0 after the last stage)."""
    start, level = 0.0, 0.0
    for seconds, goal in stages:
        if at < start + seconds:
            return level + (goal - level) * (at - start) / seconds
        start, level = start + seconds, float(goal)
    return 0.0


def next_active(stages: Stages, slot: int, at: float) -> float | None:
    """The first time from ``at`` at which the target is above ``slot`` (``at`` itself when it
    is now); None when it never is again."""
    start, level = 0.0, 0.0
    for seconds, goal in stages:
        end = start + seconds
        if end > at:
            begin = max(at, start)
            if target(stages, begin) > slot:
                return begin
            if goal > slot and seconds > 0:  # rising through the slot within this stage
                crossing = start + (slot - level) / (goal - level) * seconds
                return max(begin, crossing) + 1e-9
        start, level = end, float(goal)
    return None


def parse_rates(text: str) -> RateStages | None:
    """``30s:5/s,60s:20/s``: stages whose targets are rates; None when no target is one (the
    stages of a closed loop, for ``parse``)."""
    parts = [part.strip() for part in text.split(",")]
    rated = [_RATE_STAGE.match(part) for part in parts]
    if not any(part.endswith("/s") for part in parts):
        return None
    for part, match in zip(parts, rated, strict=True):
        if match is None:
            raise GateError(
                f"--stages: '{part}' is not DURATION:RATE/s; with one target a rate, each is "
                "one: '30s:5/s,60s:20/s,30s:0/s' (ramp to 5 tasks/s in 30 s, to 20 in 60 s…)"
            )
    stages = tuple(
        (float(m.group(1)) * _SCALE[m.group(2) or "s"], float(m.group(3)))
        for m in rated
        if m is not None
    )
    if len(arrivals(stages)) < 1:
        raise GateError("--stages: the rates must start at least one task (rate × time ≥ 1)")
    return stages


def open_loop(stages: RateStages) -> Rate:
    """The open loop that starts a task at each of the stages' arrivals, every pass (as a
    replayed trace, ``load.trace`` in meta.json); its mean rate, for show."""
    offsets = arrivals(stages)
    return Rate(len(offsets) / sum(s for s, _ in stages), "constant", None, None, trace=offsets)


def arrivals(stages: RateStages) -> tuple[float, ...]:
    """When each task starts, in seconds from the run's start: the k-th (from 0) when the
    arrivals due so far, the integral of the rate, reach k (at a steady rate r: k / r, as an
    open loop's constant schedule)."""
    out: list[float] = []
    start, level, due = 0.0, 0.0, 0.0  # the stage's start time, rate then, and arrivals due
    for seconds, goal in stages:
        # Within the stage, due(x) = due + level·x + slope·x²/2: each k it passes, solved.
        slope = (goal - level) / seconds if seconds > 0 else 0.0
        after = due + (level + goal) / 2 * seconds
        k = math.ceil(due - 1e-9)
        while k < after - 1e-9:
            out.append(start + _reach(k - due, level, slope))
            k += 1
        start, level, due = start + seconds, goal, after
    return tuple(out)


def _reach(extra: float, level: float, slope: float) -> float:
    """The time x ≥ 0 at which level·x + slope·x²/2 = extra."""
    if abs(slope) < 1e-12:
        return extra / level
    return (-level + math.sqrt(max(0.0, level * level + 2 * slope * extra))) / slope
