"""Ramping stages (``run --stages "30s:8,60s:32,30s:0"``, k6's ramping-VUs ``stages``): the
closed loop's target concurrency over a measured run, moving linearly from the last stage's
target (0 at the start) to each stage's over its duration. Task slot k works while the target
is above k; a slot the ramp-down leaves finishes its task first (k6's graceful ramp-down).
Pure: stages in, targets and times out."""

from __future__ import annotations

import re

from perfbench.errors import GateError

Stages = tuple[tuple[float, int], ...]  # (seconds, target concurrency at its end)

_STAGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*:\s*(\d+)\s*$")
_SCALE = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


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
