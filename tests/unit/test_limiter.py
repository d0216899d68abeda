"""The runner's Limiter: a concurrency limit that changes while tasks wait, down to zero (a worker
whose share of a coordinated AIMD limit is nothing for now). Virtual time: instant."""

from __future__ import annotations

import anyio
import pytest

from perfbench.engine.limiter import Limiter
from perfbench.engine.share import Share

pytestmark = pytest.mark.anyio


async def test_a_zero_limit_holds_everyone_until_it_is_raised() -> None:
    gate = Limiter(0)
    passed: list[float] = []

    async def one() -> None:
        await gate.acquire()
        passed.append(anyio.current_time())

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
        await anyio.sleep(5)
        assert passed == []
        gate.set(2)  # two may pass at once, the third waits for a release
        await anyio.sleep(1)
        assert len(passed) == 2 and gate.used == 2
        gate.release()
    assert len(passed) == 3 and gate.used == 2


async def test_lowering_the_limit_lets_nobody_new_in_until_below_it() -> None:
    gate = Limiter(3)
    for _ in range(3):
        await gate.acquire()
    gate.set(1)
    with anyio.move_on_after(1) as scope:
        await gate.acquire()
    assert scope.cancelled_caught
    gate.release()
    gate.release()  # used 1: still not below the limit of 1
    with anyio.move_on_after(1) as scope:
        await gate.acquire()
    assert scope.cancelled_caught
    gate.release()
    await gate.acquire()  # now there is room
    assert gate.used == 1


@pytest.mark.parametrize("total", [0, 1, 2, 5, 64, 255])
def test_split_shares_add_up_and_differ_by_at_most_one(total: int) -> None:
    for count in (1, 2, 3, 4):
        shares = [Share(i, count).split(total) for i in range(count)]
        assert sum(shares) == total and max(shares) - min(shares) <= 1
