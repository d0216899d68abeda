"""The client monitor on virtual time: a loop kept busy shows as lag, exactly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import trio

from perfbench.clock import bind, default_clock
from perfbench.engine.monitor import ClientMonitor
from perfbench.stats.advice import advise

Script = Callable[[ClientMonitor, trio.testing.MockClock], Awaitable[None]]


async def watched(script: Script) -> dict[str, Any]:
    """Run the monitor's watcher while ``script`` keeps the (virtual) loop busy; its lag."""
    monitor = ClientMonitor(bind(default_clock), interval=0.02)
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.watch)
        await script(monitor, clock)
        tg.cancel_scope.cancel()
    lag = monitor.lag.summary()
    assert lag is not None
    return lag


@pytest.mark.anyio
async def test_a_busy_loop_shows_as_lag_of_exactly_the_busy_time() -> None:
    async def busy(monitor: ClientMonitor, clock: trio.testing.MockClock) -> None:
        await anyio.sleep(0.105)  # 5 on-time wake-ups (0.02 … 0.10)
        clock.jump(0.05)  # the loop is busy for 50 ms without yielding: due 0.12, woken 0.155
        await anyio.sleep(0.1)

    lag = await watched(busy)
    assert lag["max"] == pytest.approx(0.035) and lag["p50"] == 0.0
    assert lag["n"] >= 9


@pytest.mark.anyio
async def test_time_spent_while_paused_is_not_lag() -> None:
    # Between passes the runner pauses the monitor: a pass's statistics take the loop for a
    # while, with no task in flight to be delayed by it.
    async def between_passes(monitor: ClientMonitor, clock: trio.testing.MockClock) -> None:
        await anyio.sleep(0.105)
        monitor.pause()
        clock.jump(0.05)  # busy for 50 ms, paused
        monitor.resume()  # at 0.155; the watcher, due at 0.12, is not counted, then due 0.175…
        await anyio.sleep(0.11)
        clock.jump(0.03)  # busy for 30 ms while recording, from 0.265: due 0.275, woken 0.295
        await anyio.sleep(0.1)

    lag = await watched(between_passes)
    assert lag["max"] == pytest.approx(0.02)  # not the 0.035 of the paused stretch


def test_warnings_name_the_client_as_the_bottleneck() -> None:
    busy = {"loop_lag": {"p99": 0.012}, "cpu_share": 0.97}
    summary = {"runs": [{"overall": {"tasks": 1, "ok": 1, "expect_mismatch": 0}}] * 3}
    summary |= {"across_runs": {"overall": {}}, "pooled": {"overall": {}, "cases": {}}}
    notes = advise({**summary, "client": busy}, {})
    assert any("12.0 ms late at P99" in n for n in notes)
    assert any("97% of a CPU core" in n for n in notes)
    quiet = {"loop_lag": {"p99": 0.001}, "cpu_share": 0.2}
    assert not [n for n in advise({**summary, "client": quiet}, {}) if "perfbench" in n]


def test_the_client_warning_comes_before_advice_on_too_few_runs() -> None:
    """The short screen shows the first warnings only: the one that doubts the result (the
    client set the pace, what --strict exits 7 on) must not be pushed below the advice."""
    busy = {"loop_lag": {"p99": 0.012}, "cpu_share": 0.97}
    summary = {"runs": [{"overall": {"tasks": 1, "ok": 1, "expect_mismatch": 0}}]}
    summary |= {"across_runs": {"overall": {}}, "pooled": {"overall": {}, "cases": {}}}
    notes = advise({**summary, "client": busy}, {})
    client = next(i for i, n in enumerate(notes) if "CPU core" in n)
    runs = next(i for i, n in enumerate(notes) if "measured run(s)" in n)
    assert client < runs, notes
