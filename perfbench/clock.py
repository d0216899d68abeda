"""The one way perfbench reads time. Everything that measures takes a ``Clock``; the default is
the event loop's monotonic clock, which under trio's ``MockClock`` is virtual, so tests can
assert exact latencies and run instantly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio

Clock = Callable[[], float]


def default_clock() -> float:
    return anyio.current_time()


def bind(clock: Clock) -> Clock:
    """The fastest equivalent of ``clock`` for the running event loop. ``anyio.current_time``
    looks the backend up on every call (about 5 µs); a run reads the clock dozens of times
    per task, so the runner binds it once. Call from inside the event loop."""
    if clock is not default_clock:
        return clock
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # not asyncio, so trio (anyio's other backend)
        import trio

        return trio.current_time


async def sleep_until(clock: Clock, deadline: float) -> None:
    """Sleep to an absolute deadline, so timer jitter does not accumulate over many steps."""
    delay = deadline - clock()
    if delay > 0:
        await anyio.sleep(delay)
