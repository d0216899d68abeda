"""A worker on another host (``--ray`` over nodes) has its own monotonic clock: the parent
measures the offset by round trips before the Start (``Fleet._offset``, ``host.clock_offset``),
and the worker moves the run's origin and every pass's go onto its clock. Here both ends are
on one host, so the true offset is 0: a worker that says it booted elsewhere is measured
within half the shortest round trip of it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from perfbench import host
from perfbench.engine import worker
from perfbench.engine.fleet import Fleet
from perfbench.engine.messages import Channel, Hello, Start


def test_the_soonest_round_trip_gives_the_offset() -> None:
    # Their clock runs 100 s ahead; the second trip is the short one (2 ms), the others slow.
    pings = [(10.0, 110.009, 10.030), (11.0, 111.001, 11.002), (12.0, 112.020, 12.025)]
    assert host.clock_offset(pings) == pytest.approx(100.0, abs=0.001)


def test_one_boot_is_one_clock() -> None:
    assert host.boot_id() == host.boot_id()  # stable: the same host, the same clock


async def _measure(tmp: Path, boot: str) -> float:
    path = str(tmp / "s.sock")
    got: list[float] = []
    async with await anyio.create_unix_listener(path) as listener:

        async def parent() -> None:
            channel = Channel(await listener.accept())
            fleet = Fleet.__new__(Fleet)  # only its clock measurement, no run
            got.append(await fleet._offset(channel, Hello(0, boot)))
            await channel.send(_start())
            await channel.aclose()

        async def child() -> None:
            channel = Channel(await anyio.connect_unix(path))
            start = await worker._started(channel)  # answers the pings, returns the Start
            assert isinstance(start, Start)
            await channel.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(parent)
            tg.start_soon(child)
    return got[0]


def _start() -> Start:
    from perfbench.engine.resume import Resume
    from perfbench.engine.share import Share
    from perfbench.spec import RunSpec
    from perfbench.stats.cost import Pricer
    from perfbench.suite import Case, Suite

    suite = Suite.of("s", [Case(id="c", language="en", input="hi")])
    pricer = Pricer(datetime.now(UTC))
    return Start(RunSpec(), suite, Share(0, 1), 0.0, pricer, None, Resume(), None)


def test_a_worker_of_another_boot_is_measured_and_one_of_this_boot_is_not(tmp_path: Path) -> None:
    measured = anyio.run(_measure, tmp_path, "another-host's-boot")
    assert measured == pytest.approx(0.0, abs=0.005)  # the same clock, measured as such
    assert measured != 0.0  # it was measured (an exact 0 would mean it was not)
    assert anyio.run(_measure, tmp_path, host.boot_id()) == 0.0
