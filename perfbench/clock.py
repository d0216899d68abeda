"""The one way perfbench reads time. Everything that measures takes a ``Clock``; the default is
the event loop's monotonic clock, which under trio's ``MockClock`` is virtual, so tests can
assert exact latencies and run instantly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import anyio

Clock = Callable[[], float]


def default_clock() -> float:
    return anyio.current_time()


def bind(clock: Clock) -> Clock:
    """The clock to measure with in the running event loop, resolved once per run
    (``anyio.current_time`` looks the backend up on every call, about 5 µs).

    On asyncio this is ``time.monotonic``, not the loop's ``time()``: uvloop's loop time is
    libuv's cached millisecond clock, which rounds every latency to whole milliseconds. Under
    trio it is trio's clock, which a test's ``MockClock`` makes virtual. Sleeps computed from
    either are fine: ``sleep_until`` converts deadlines to durations."""
    if clock is not default_clock:
        return clock
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not asyncio, so trio (anyio's other backend)
        import trio

        return trio.current_time
    return time.monotonic


async def sleep_until(clock: Clock, deadline: float) -> None:
    """Sleep to an absolute deadline, so timer jitter does not accumulate over many steps."""
    delay = deadline - clock()
    if delay > 0:
        await anyio.sleep(delay)


def loop_clock() -> Clock:
    """The event loop's own clock, on which cancel-scope deadlines are set, resolved once."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:
        import trio

        return trio.current_time
