"""Load shapes: how many tasks are in flight, or when each one starts.

Fixed(concurrency)        closed loop: N tasks in flight (the default, ``Plan.concurrency``)
Adaptive(start, maximum)  closed loop whose limit follows rate-limit feedback (AIMD)
Rate(per_second, ...)     open loop: tasks start at scheduled times, whatever is in flight
Rate(trace=offsets)       open loop replaying recorded arrival times (``load.trace``)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Adaptive:
    start: int = 1
    maximum: int = 256
    decrease: float = 0.8  # the limit is multiplied by this on each rate-limit episode
    cooldown_s: float = 1.0  # after a decrease: no growth, and further 429s are the same episode


@dataclass(frozen=True)
class Rate:
    per_second: float
    arrival: Literal["constant", "poisson"] = "constant"
    duration_s: float | None = None  # else one pass over the suite (× repeat) per run
    max_in_flight: int | None = None  # tasks that would exceed it are dropped, and counted
    # Replayed arrivals (`run --trace FILE`): each pass starts a task at each of these offsets
    # (seconds from the pass's start, sorted), in place of a schedule at ``per_second``.
    trace: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.trace is not None and not isinstance(self.trace, tuple):  # from a JSON doc
            object.__setattr__(self, "trace", tuple(self.trace))

    def count(self, tasks_per_pass: int) -> int:
        if self.trace is not None:
            return len(self.trace)
        if self.duration_s is None:
            return tasks_per_pass
        return max(1, round(self.per_second * self.duration_s))


Load = Adaptive | Rate
