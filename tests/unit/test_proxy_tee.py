"""The proxy's ``Tee`` keeps each chunk of a recorded call with the moment its bytes arrived
(the client's socket stamp), not the moment the proxy got round to it: the write to the agent
comes after the stamp, so a slow agent or a busy proxy is not recorded as the upstream's
delay (a replay then served it again on top of its own: TTFT P50 +60 ms at load average 17)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

from perfbench.proxy.forward import Tee

WRITE_S = 0.05  # what the agent's write takes: far more than the stamps' spacing


class _Upstream:
    """A streamed response whose chunks arrived 1 ms and 2 ms after the request went out."""

    status_code = 200

    def __init__(self, since: float) -> None:
        self.headers: dict[str, str] = {}
        self.arrived: float | None = None
        self._stamped = [(since + 0.001, b"data: one\n\n"), (since + 0.002, b"data: two\n\n")]

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for at, chunk in self._stamped:
            self.arrived = at
            yield chunk


class _SlowAgent:
    def __init__(self) -> None:
        self.got: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        await anyio.sleep(WRITE_S)
        self.got.append(chunk)


def test_a_recorded_chunk_is_timed_by_its_arrival_not_by_the_write_to_the_agent() -> None:
    since = [time.monotonic()]
    agent = _SlowAgent()
    tee = Tee(_Upstream(since[0]), agent, since)  # type: ignore[arg-type]

    async def relay() -> None:
        async for _ in tee.aiter_bytes():
            pass

    anyio.run(relay)
    assert agent.got == [b"data: one\n\n", b"data: two\n\n"]  # the agent got every chunk
    offsets = [at for at, _ in tee.chunks]
    assert offsets == pytest.approx([0.001, 0.002], abs=1e-9), offsets


def test_a_chunk_without_an_arrival_stamp_is_timed_when_read_before_the_write() -> None:
    """httpx (trio, a test transport) stamps nothing: the chunk is timed as it is read."""
    since = [time.monotonic()]

    class Unstamped(_Upstream):
        async def aiter_bytes(self) -> AsyncIterator[bytes]:
            for _, chunk in self._stamped:
                yield chunk

    tee = Tee(Unstamped(since[0]), _SlowAgent(), since)  # type: ignore[arg-type]

    async def relay() -> None:
        async for _ in tee.aiter_bytes():
            pass

    anyio.run(relay)
    first, second = (at for at, _ in tee.chunks)
    assert second - first >= WRITE_S  # read after the first one's write, and timed then
