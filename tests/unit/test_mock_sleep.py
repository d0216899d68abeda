"""The mock's wait for a due time: on a timer, and with ``--precise`` the last stretch spent
yielding to the loop (timers count whole milliseconds), on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from perfbench.mock import server


class FakeTime:
    """time.monotonic and asyncio.sleep together: a timer oversleeps by ``late``, a yield
    takes ``tick``."""

    def __init__(self, late: float, tick: float = 0.0001) -> None:
        self.now, self.late, self.tick = 10.0, late, tick
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay + self.late if delay > 0 else self.tick


@pytest.mark.parametrize(
    ("spin", "woken_within"),
    [(0.0, 0.0009), (0.0015, 0.0001)],
    ids=["timer only: up to a timer's lateness", "precise: within one yield"],
)
def test_a_due_time_is_met_within(
    monkeypatch: pytest.MonkeyPatch, spin: float, woken_within: float
) -> None:
    fake = FakeTime(late=0.0009)
    monkeypatch.setattr(server.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(server.asyncio, "sleep", fake.sleep)
    asyncio.run(server._sleep_until(10.050, spin))
    assert 10.050 <= fake.now <= 10.050 + woken_within + 1e-12
    assert fake.sleeps[0] == pytest.approx(0.050 - spin)  # one timer for all but the spin
    yields = fake.sleeps[1:]  # then only yields, when precise
    assert (yields == []) if not spin else (yields and set(yields) == {0})
