"""The client pool's aiohttp path: a request leaves in the step that sends it."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from perfbench.targets.pool import Pool, _Started

RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


@contextmanager
def one_shot_server() -> Iterator[tuple[str, threading.Event]]:
    """A loopback server in a thread: sets the event when a request's bytes arrive, then
    answers it. Its own thread, so it sees the bytes while the client's loop is blocked."""
    arrived = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            arrived.set()
            conn.sendall(RESPONSE)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", arrived
    finally:
        listener.close()
        thread.join(5)


def test_the_request_goes_out_before_anything_queued_behind_it_runs() -> None:
    """The moment perfbench marks a request sent, its bytes must be on the wire: TTFT counts
    from there. aiohttp writes the body from a new task, which on Python 3.11 waits behind
    every callback already queued, so at 64 busy streams a request sat in the client for up
    to 36 ms after being marked sent. Here the callback queued at that moment blocks the loop
    and looks whether the server has the request yet."""
    seen: list[bool] = []

    async def main(url: str, arrived: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        pool = Pool(1)

        def sent() -> None:
            loop.call_soon(lambda: seen.append(arrived.wait(5.0)))

        try:
            async with pool.post(url + "/v1/x", b'{"a": 1}', {}, 10.0, sent) as response:
                assert response.status_code == 200
                assert await response.aread() == b"{}"
        finally:
            await pool.aclose()

    with one_shot_server() as (url, arrived):
        asyncio.run(main(url, arrived))
    assert seen == [True]


async def _steps(log: list[str], fut: asyncio.Future[int]) -> int:
    log.append("before")
    value = await fut
    log.append("after")
    return value * 2


def test_started_runs_to_the_first_suspension_at_once_and_the_task_resumes_it() -> None:
    async def main() -> None:
        log: list[str] = []
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        coro = _Started(_steps(log, fut))
        assert log == ["before"]  # ran eagerly, before any task exists
        task = asyncio.ensure_future(coro)
        await asyncio.sleep(0)
        assert log == ["before"] and not task.done()
        fut.set_result(21)
        assert await task == 42
        assert log == ["before", "after"]

    asyncio.run(main())


async def _finish_at_once() -> str:
    return "done"


async def _fail_at_once() -> None:
    raise ValueError("broken")


def test_started_gives_the_task_a_result_or_an_error_reached_eagerly() -> None:
    async def main() -> None:
        assert await asyncio.ensure_future(_Started(_finish_at_once())) == "done"
        with pytest.raises(ValueError, match="broken"):
            await asyncio.ensure_future(_Started(_fail_at_once()))

    asyncio.run(main())


def test_started_can_be_cancelled_while_suspended() -> None:
    async def main() -> None:
        log: list[str] = []
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(_Started(_steps(log, fut)))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["before"] and fut.cancelled()

    asyncio.run(main())
