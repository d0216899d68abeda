"""The client pool's aiohttp path: a request leaves in the step that sends it."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from perfbench.http import HttpClient
from perfbench.http.aiohttp_backend import AiohttpBackend, _Started

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
        pool = HttpClient(1)

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


HEADERS = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 20\r\n\r\n"


def answer(
    listener: socket.socket, asked: Callable[[], object], go: threading.Event, body: bytes
) -> None:
    """Serve one connection: read its request, send HEADERS, say so, then the body on ``go``."""
    conn, _ = listener.accept()
    with conn:
        while b"\r\n\r\n" not in conn.recv(65536):
            pass
        conn.sendall(HEADERS)
        asked()
        go.wait(5)
        conn.sendall(body)


def test_body_bytes_are_timed_when_they_arrive_not_when_a_busy_client_reads_them() -> None:
    """Two streams get their first bytes in the same loop pass; the task that runs first then
    holds the loop for 1 s. The other stream's bytes still carry their arrival time: the
    client's own delay is not the server's latency."""
    listener = socket.create_server(("127.0.0.1", 0))
    both_asked = threading.Barrier(3)
    go = threading.Event()

    def serve() -> None:
        answer(listener, lambda: both_asked.wait(5), go, b"data: token\n\n" + b"data: x\n\n"[:7])

    servers = [threading.Thread(target=serve, daemon=True) for _ in range(2)]
    for thread in servers:
        thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/x"
    stamps: list[tuple[float, float]] = []  # (arrived, read)

    async def stream(pool: HttpClient) -> None:
        async with pool.post(url, b"{}", {}, 10.0, lambda: None) as response:
            chunks = response.aiter_bytes()
            async for _ in chunks:
                now = time.monotonic()  # without a stamp, a token is timed when read
                stamps.append((getattr(response, "arrived", None) or now, now))
                time.sleep(1.0)  # noqa: ASYNC251 (a busy client: every other task waits)
                break
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    async def main() -> None:
        pool = HttpClient(2)

        def release() -> None:
            # Hold the loop while both servers send, so one pass hands both streams their bytes.
            both_asked.wait(5)
            go.set()
            time.sleep(0.2)

        async def hold() -> None:
            await asyncio.sleep(0.2)  # both requests are out and their headers read
            release()

        try:
            await asyncio.gather(stream(pool), stream(pool), hold())
        finally:
            await pool.aclose()

    try:
        asyncio.run(main())
    finally:
        listener.close()
    (arrived_a, read_a), (arrived_b, read_b) = sorted(stamps, key=lambda s: s[1])
    assert read_b - read_a >= 1.0  # the second stream was read after the first's hold
    assert abs(arrived_b - arrived_a) < 0.5  # but both were timed at their (shared) arrival
    assert arrived_a <= read_a and arrived_b <= read_b - 1.0


def _loops() -> list[object]:
    factories: list[object] = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return factories
    return [*factories, uvloop.new_event_loop]


@pytest.mark.skipif(not hasattr(select, "epoll"), reason="Linux's epoll")
@pytest.mark.parametrize("loop_factory", _loops(), ids=lambda f: f.__module__.split(".")[0])
def test_bytes_that_arrive_while_the_client_works_are_timed_from_its_next_poll(
    loop_factory: Any,
) -> None:
    """The loop reads a socket only after every callback queued before the bytes came has run.
    perfbench polls its connections between its own steps, so bytes that arrive in the middle
    of a long loop pass are timed from the first poll after they came, not the pass's end."""
    listener = socket.create_server(("127.0.0.1", 0))
    asked, go = threading.Event(), threading.Event()

    threading.Thread(
        target=answer, args=(listener, asked.set, go, b"data: token\n\n"), daemon=True
    ).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/x"
    got: dict[str, float] = {}

    async def main() -> None:
        pool = HttpClient(1)
        try:
            async with pool.post(url, b"{}", {}, 10.0, lambda: None) as response:
                asked.wait(5)
                # One long pass of the client's own work: the bytes come during it, perfbench
                # polls (as it does when a request goes out or a chunk is read), work goes on.
                go.set()
                time.sleep(0.2)  # noqa: ASYNC251 (the client busy: the loop is held)
                got["poll"] = time.monotonic()
                assert isinstance(pool._backend, AiohttpBackend)
                pool._backend._stamps.poll()
                got["polled"] = time.monotonic()
                time.sleep(0.5)  # noqa: ASYNC251
                async for _ in response.aiter_bytes():
                    got["read"] = time.monotonic()
                    got["arrived"] = getattr(response, "arrived", None) or got["read"]
                    break
        finally:
            await pool.aclose()

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:  # type: ignore[arg-type]
            runner.run(main())
    finally:
        listener.close()
    assert got["poll"] <= got["arrived"] <= got["polled"]  # not when read, 0.5 s later
    assert got["read"] - got["polled"] >= 0.5


def test_opening_a_target_makes_its_clients_before_the_first_task() -> None:
    """Made by the first request instead, the clients (aiohttp's import, its session) cost
    that task 0.1–0.25 s of latency when it was measured: with --warmup 0, or the first task
    of a resumed pass."""
    from contextlib import AsyncExitStack

    from perfbench.targets import open_target
    from perfbench.targets.agent_loop import ModelAgent
    from perfbench.targets.openai_chat import OpenAIChat

    async def main() -> None:
        agent = ModelAgent(OpenAIChat("m"), "http://127.0.0.1:9/v1", name="openai/m")
        async with AsyncExitStack() as stack:
            assert agent._http._backend is None
            await open_target(agent, stack)
            assert agent._http._backend is not None
        assert agent._http._backend is None  # and closed with the target

    asyncio.run(main())


def test_a_reply_complete_before_the_client_looks_is_still_timed_from_its_arrival() -> None:
    """aiohttp lets go of a connection as soon as its body is complete: a reply that arrived
    whole before perfbench looked had no connection, hence no protocol, hence no stamp, and
    was timed when read (98–99.96% of replies on Python 3.12; on 3.11 the deferred release of
    the writer task hid it, until that was fixed too)."""
    got: list[tuple[float | None, float]] = []

    async def main(url: str, arrived: threading.Event) -> None:
        pool = HttpClient(1)
        loop = asyncio.get_running_loop()

        def busy() -> None:  # the reply comes, whole, while the client is busy
            arrived.wait(5)
            time.sleep(0.1)
            assert isinstance(pool._backend, AiohttpBackend)
            pool._backend._stamps.poll()  # perfbench sees it waiting (between its own steps)
            time.sleep(0.3)

        try:
            async with pool.post(url + "/v1/x", b"{}", {}, 10.0, lambda: loop.call_soon(busy)) as r:
                body = await r.aread()
                got.append((getattr(r, "arrived", None), time.monotonic()))
            assert body == b"{}"
        finally:
            await pool.aclose()

    with one_shot_server() as (url, arrived):
        asyncio.run(main(url, arrived))
    [(stamp, read)] = got
    assert stamp is not None and read - stamp >= 0.25  # timed when first seen, not when read


def test_the_private_aiohttp_hooks_perfbench_uses_are_there() -> None:
    """aiohttp is bounded in pyproject.toml; a release inside the bound that renames one of
    these would silently turn a measurement device off: this says which."""
    import aiohttp
    from aiohttp.client_proto import ResponseHandler

    async def connector_factory() -> bool:
        return hasattr(aiohttp.TCPConnector(), "_factory")  # the connection's protocol class

    assert asyncio.run(connector_factory())
    assert hasattr(ResponseHandler, "data_received")
    assert callable(getattr(aiohttp.ClientRequest, "write_bytes", None))
    assert callable(getattr(aiohttp.ClientResponse, "_ClientResponse__reset_writer", None))
    assert isinstance(getattr(aiohttp.ClientResponse, "_writer", None), property)
