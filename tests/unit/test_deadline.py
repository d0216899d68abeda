"""A worker slot's timeout on asyncio (engine/deadline.LoopDeadline): one loop timer for
many tasks, re-armed only when it fires early or a nearer deadline comes, and the scope still
cancelled exactly at the deadline of the task in flight. Driven by a fake loop's clock."""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Any

from perfbench.engine.deadline import LoopDeadline


class _Handle:
    def __init__(self, when: float, callback: Any) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class _Loop:
    """time() and call_at(), with the clock moved by ``advance``."""

    def __init__(self) -> None:
        self.now = 0.0
        self.armed = 0  # call_at calls
        self._timers: list[tuple[float, int, _Handle]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any) -> _Handle:
        self.armed += 1
        handle = _Handle(when, callback)
        heapq.heappush(self._timers, (when, next(self._order), handle))
        return handle

    def advance(self, to: float) -> None:
        while self._timers and self._timers[0][0] <= to:
            when, _, handle = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            if not handle.cancelled:
                handle.callback()
        self.now = to


class _Scope:
    def __init__(self, loop: _Loop) -> None:
        self.loop, self.cancelled_at = loop, None

    def cancel(self) -> None:
        self.cancelled_at = self.loop.now


def _keeper() -> tuple[_Loop, _Scope, LoopDeadline]:
    loop = _Loop()
    scope = _Scope(loop)
    return loop, scope, LoopDeadline(scope, loop)  # type: ignore[arg-type]


def test_a_hundred_tasks_in_a_row_arm_one_timer() -> None:
    loop, scope, deadline = _keeper()
    for k in range(100):  # a 60 s timeout, tasks 10 ms apart: each deadline later
        loop.advance(k * 0.01)
        deadline.set(loop.now + 60)
    assert loop.armed == 1 and scope.cancelled_at is None


def test_the_scope_is_cancelled_exactly_at_the_current_tasks_deadline() -> None:
    loop, scope, deadline = _keeper()
    deadline.set(60.0)  # armed for this one
    loop.advance(1.0)
    deadline.set(61.0)  # the next task: no new timer yet
    loop.advance(60.5)  # the timer fires early for a task that is done: re-armed, no cancel
    assert scope.cancelled_at is None and loop.armed == 2
    loop.advance(62.0)
    assert scope.cancelled_at == 61.0


def test_a_nearer_deadline_re_arms_and_none_never_cancels() -> None:
    loop, scope, deadline = _keeper()
    deadline.set(60.0)
    deadline.set(2.0)  # a case with a shorter timeout
    loop.advance(2.5)
    assert scope.cancelled_at == 2.0
    loop, scope, deadline = _keeper()
    deadline.set(5.0)
    deadline.set(math.inf)  # waiting for a slot: no deadline
    loop.advance(100.0)
    assert scope.cancelled_at is None and loop.armed == 1  # fired once, not re-armed


def test_leaving_cancels_the_timer() -> None:
    loop, scope, deadline = _keeper()
    with deadline:
        deadline.set(5.0)
    loop.advance(10.0)
    assert scope.cancelled_at is None
