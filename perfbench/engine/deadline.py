"""A worker slot's timeout: its cancel scope cancelled at the deadline of the task in flight.

A slot runs its tasks one after another in one cancel scope whose deadline moves per task
(``engine/runner``). On asyncio, moving a scope's deadline re-arms a loop timer every time
(anyio cancels the old ``TimerHandle`` and schedules a new one: ~2.7 % of a worker's CPU on
short tasks, `make profile`). Tasks of one case follow each other, so the next deadline is
almost always later than the last: ``LoopDeadline`` keeps one timer, armed at the earliest
deadline it was given, and when it fires early (the task it was armed for is done) re-arms
once for the current one. The scope is cancelled exactly at the current task's deadline, as
before, with one timer per timeout's length rather than one per task. Elsewhere (trio, the
tests' virtual time) the scope's own deadline is moved, as it was."""

from __future__ import annotations

import asyncio
import math
from types import TracebackType

import anyio


class ScopeDeadline:
    """The scope's own deadline, moved per task."""

    def __init__(self, scope: anyio.CancelScope) -> None:
        self._scope = scope

    def set(self, when: float) -> None:
        """Cancel the scope at ``when`` (the loop's clock; ``math.inf``: never)."""
        self._scope.deadline = when

    def __enter__(self) -> ScopeDeadline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class LoopDeadline:
    """One asyncio timer for the scope, re-armed only when it fires early or a nearer
    deadline comes."""

    __slots__ = ("_armed", "_handle", "_loop", "_scope", "due")

    def __init__(self, scope: anyio.CancelScope, loop: asyncio.AbstractEventLoop) -> None:
        self._scope, self._loop = scope, loop
        self.due = math.inf  # the current task's deadline
        self._armed = math.inf  # when the timer fires
        self._handle: asyncio.TimerHandle | None = None

    def set(self, when: float) -> None:
        """Cancel the scope at ``when`` (the loop's clock; ``math.inf``: never)."""
        self.due = when
        if when < self._armed:
            self._arm(when)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle, self._armed = None, math.inf
        if self._loop.time() >= self.due:
            self._scope.cancel()
        elif self.due != math.inf:
            self._arm(self.due)  # armed for a task already done: now for the current one

    def __enter__(self) -> LoopDeadline:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def deadline_of(scope: anyio.CancelScope) -> LoopDeadline | ScopeDeadline:
    """The deadline keeper for ``scope``: one asyncio timer on asyncio, else the scope's own."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return ScopeDeadline(scope)
    return LoopDeadline(scope, loop)
