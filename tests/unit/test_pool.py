"""The HTTP client on asyncio (http/h1_backend.py): a request leaves in the step that sends it,
its bytes are timed when they arrive, and its connection is reused only when it is whole."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from perfbench.http import CallFailed, HttpClient
from perfbench.http.h1_backend import H1Backend

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
    from there. aiohttp's ClientSession wrote the body from a new task, which on Python 3.11
    waits behind every callback already queued (at 64 busy streams a request sat in the client
    up to 36 ms after being marked sent); perfbench's connections write it at once. Here the
    callback queued at that moment blocks the loop and looks whether the server has it yet."""
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
                assert isinstance(pool._backend, H1Backend)
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

    from perfbench.apis.openai_chat import OpenAIChat
    from perfbench.targets import open_target
    from perfbench.targets.agent_loop import ModelAgent

    async def main() -> None:
        agent = ModelAgent(OpenAIChat("m"), "http://127.0.0.1:9/v1", name="openai/m")
        async with AsyncExitStack() as stack:
            assert agent._http._backend is None
            await open_target(agent, stack)
            assert agent._http._backend is not None
        assert agent._http._backend is None  # and closed with the target

    asyncio.run(main())


def test_a_reply_complete_before_the_client_looks_is_still_timed_from_its_arrival() -> None:
    """A reply that arrived whole before perfbench looked is timed from its arrival (through
    aiohttp's ClientSession, whose connection let go of it once complete, 98–99.96% of replies
    on Python 3.12 were timed when read)."""
    got: list[tuple[float | None, float]] = []

    async def main(url: str, arrived: threading.Event) -> None:
        pool = HttpClient(1)
        loop = asyncio.get_running_loop()

        def busy() -> None:  # the reply comes, whole, while the client is busy
            arrived.wait(5)
            time.sleep(0.1)
            assert isinstance(pool._backend, H1Backend)
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


def test_the_backend_is_the_one_asked_for_or_an_error_never_another() -> None:
    """``auto`` is h1 on asyncio and httpx under trio or with a transport; ``h1`` asked for
    where it cannot run is an error that says what to ask for instead."""
    import anyio
    import httpx

    from perfbench.errors import TargetError

    async def built(**kwargs: Any) -> str:
        client = HttpClient(1, **kwargs)
        try:
            return client.backend
        finally:
            await client.aclose()

    mock = httpx.MockTransport(lambda request: httpx.Response(200))
    assert anyio.run(built, backend="asyncio") == "h1"
    assert anyio.run(lambda: built(transport=mock), backend="asyncio") == "httpx"
    assert anyio.run(built, backend="trio") == "httpx"
    assert anyio.run(lambda: built(backend="httpx"), backend="asyncio") == "httpx"
    with pytest.raises(TargetError, match="runs on asyncio only: backend='httpx'"):
        anyio.run(lambda: built(backend="h1"), backend="trio")
    with pytest.raises(TargetError, match="needs the httpx backend"):
        HttpClient(1, transport=mock, backend="h1")


# aiohttp's underscore-private names the client relies on, and for what. pyproject.toml bounds
# aiohttp; a release inside the bound that moves one fails here, saying which.
PRIVATE = {
    "_gen_default_accept_encoding": "the Accept-Encoding aiohttp sends: the codings it decodes",
    "_parser": "where BaseProtocol's flow control finds the parser to pause",
    "_reading_paused": "a read perfbench holds back is not the server's silence (read timeout)",
    "_loop": "the loop BaseProtocol keeps, for the connection's timer",
}


def test_the_private_aiohttp_names_the_client_uses_are_all_pinned() -> None:
    """Every underscore name h1_backend takes from aiohttp (an import, or an attribute its
    connection reads but never sets, which is BaseProtocol's) is one of ``PRIVATE``: a new
    one is pinned here, with what it is for, before it ships."""
    import ast
    import inspect

    from perfbench.http import h1_backend

    tree = ast.parse(inspect.getsource(h1_backend))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aiohttp")
        for alias in node.names
        if alias.name.startswith("_")
    }
    [conn] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Connection"]
    used, own = set(), set()
    for node in ast.walk(conn):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self" and node.attr.startswith("_")):  # fmt: skip
            (own if isinstance(node.ctx, ast.Store) else used).add(node.attr)
    methods = {n.name for n in conn.body if isinstance(n, ast.FunctionDef)}
    inherited = used - own - methods
    assert imported | inherited <= set(PRIVATE), imported | inherited - set(PRIVATE)
    assert "_gen_default_accept_encoding" in imported and "_reading_paused" in inherited


def test_the_private_aiohttp_names_mean_what_the_client_takes_them_for() -> None:
    """Each of ``PRIVATE`` at work: the Accept-Encoding names gzip; a body past the stream
    reader's buffer pauses the socket through ``_parser`` and sets ``_reading_paused`` (what
    the read timeout looks at), and reading it resumes both."""
    from aiohttp.client_reqrep import _gen_default_accept_encoding

    from perfbench.http.h1_backend import _Connection
    from perfbench.http.stamps import SocketStamps

    assert "gzip" in _gen_default_accept_encoding().split(", ")

    class Transport(asyncio.Transport):
        paused = False

        def pause_reading(self) -> None:
            self.paused = True

        def resume_reading(self) -> None:
            self.paused = False

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return default

        def write(self, data: Any) -> None:
            pass

        def close(self) -> None:
            pass

    async def main() -> tuple[bool, bool, bool, bool]:
        loop = asyncio.get_running_loop()
        stamps = SocketStamps()
        conn = _Connection(loop, stamps)
        assert conn._loop is loop and conn._parser is not None
        transport = Transport()
        conn.connection_made(transport)
        exchange = asyncio.ensure_future(conn.exchange(b"POST / HTTP/1.1\r\n\r\n", 10.0))
        await asyncio.sleep(0)
        size = 2**20
        conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size)
        _, payload = await exchange
        conn.data_received(b"x" * size)  # past the reader's high water: it pauses the socket
        paused = (transport.paused, conn._reading_paused)
        body = await payload.read()
        conn.done()
        conn.close()
        stamps.close()
        return (*paused, not transport.paused and not conn._reading_paused, len(body) == size)

    assert asyncio.run(main()) == (True, True, True, True)


# -- the pool: what a server sees


@contextmanager
def counting_server(answers: Callable[[bytes], bytes | None]) -> Iterator[tuple[str, list[int]]]:
    """A keep-alive loopback server in a thread: each request's bytes to ``answers``, which
    gives the response (None: close the connection). Yields the URL and, per connection, how
    many requests it served; connections served one at a time each in their own thread."""
    served: list[int] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def one(conn: socket.socket, index: int) -> None:
        with conn, contextlib.suppress(OSError):  # the client may close first: its choice
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        return
                    data += got
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(rest) < length:
                    rest += conn.recv(65536)
                data = rest[length:]
                reply = answers(head + b"\r\n\r\n" + rest[:length])
                if reply is None:
                    return
                served[index] += 1
                conn.sendall(reply)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            served.append(0)
            threading.Thread(target=one, args=(conn, len(served) - 1), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", served
    finally:
        listener.close()


def _post_all(url: str, limit: int, n: int, read: bool = True) -> list[int]:
    async def main() -> list[int]:
        pool = HttpClient(limit)

        async def one(i: int) -> int:
            async with pool.post(url + f"/v1/x?i={i}", b"{}", {}, 10.0, lambda: None) as r:
                if read:
                    await r.aread()
                return r.status_code

        try:
            return list(await asyncio.gather(*(one(i) for i in range(n))))
        finally:
            await pool.aclose()

    return asyncio.run(main())


def test_at_most_concurrency_connections_each_reused() -> None:
    with counting_server(lambda _: RESPONSE) as (url, served):
        assert _post_all(url, 3, 30) == [200] * 30
    assert len(served) == 3 and sum(served) == 30  # three connections, kept alive


def test_a_body_left_unread_or_connection_close_is_not_reused() -> None:
    # A body that came whole is the parser's already: the connection is clean. One that is
    # still coming (1 MiB, the reader paused at 128 KiB) would be read as the next response.
    big = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % 2**20 + b"x" * 2**20
    with counting_server(lambda _: big) as (url, served):
        assert _post_all(url, 1, 3, read=False) == [200] * 3
    assert served == [1, 1, 1]
    with counting_server(lambda _: RESPONSE) as (url, served):
        assert _post_all(url, 1, 3, read=False) == [200] * 3
    assert served == [3]
    closing = RESPONSE.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n")
    with counting_server(lambda _: closing) as (url, served):
        assert _post_all(url, 1, 3) == [200] * 3
    assert served == [1, 1, 1]


def test_the_request_carries_its_headers_its_length_and_url_credentials() -> None:
    seen: list[bytes] = []

    def answer(request: bytes) -> bytes:
        seen.append(request)
        return RESPONSE

    with counting_server(answer) as (url, _):
        with_user = url.replace("http://", "http://al:pw@")

        async def main() -> None:
            pool = HttpClient(1, headers={"X-Default": "d"})
            headers = {"Content-Type": "application/json", "x-default": "mine"}
            async with pool.post(with_user + "/v1/a b?q=1", b'{"a":1}', headers, 5.0, lambda: None):
                pass
            await pool.aclose()

        asyncio.run(main())
    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/a%20b?q=1 HTTP/1.1" and body == b'{"a":1}'
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert fields["host"] == url.removeprefix("http://")
    assert fields["content-length"] == "7" and fields["x-default"] == "mine"
    assert fields["authorization"] == "Basic YWw6cHc="  # base64 of al:pw
    assert "gzip" in fields["accept-encoding"]


def test_a_reply_read_whole_is_not_timed_out_while_its_caller_works() -> None:
    """The read timeout is the server's silence: once the body is in, a caller slower than
    the timeout before it lets go keeps a connection that is fine to reuse."""

    async def main(url: str) -> None:
        pool = HttpClient(1)
        for _ in range(2):
            async with pool.post(url + "/v1", b"{}", {}, 0.05, lambda: None) as response:
                await response.aread()
                await asyncio.sleep(0.2)
        await pool.aclose()

    with counting_server(lambda _: RESPONSE) as (url, served):
        asyncio.run(main(url))
    assert served == [2]


def test_a_header_that_would_split_the_request_is_refused() -> None:
    async def main() -> None:
        pool = HttpClient(1)
        with pytest.raises(ValueError, match="CR or LF"):
            pool.post("http://127.0.0.1:9/v1", b"{}", {"x": "a\r\nevil: 1"}, 5.0, lambda: None)
        await pool.aclose()

    asyncio.run(main())


def test_a_silent_server_times_out_and_a_dropped_one_is_classified() -> None:
    headers_only = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789"

    def hold(_: bytes) -> bytes:
        return headers_only  # 10 of 100 bytes, then silence

    async def read(url: str, read_timeout: float) -> CallFailed:
        pool = HttpClient(1)
        try:
            with pytest.raises(CallFailed) as failed:
                async with pool.post(url + "/v1", b"{}", {}, read_timeout, lambda: None) as r:
                    await r.aread()
        finally:
            await pool.aclose()
        return failed.value

    with counting_server(hold) as (url, _):
        began = time.monotonic()
        silent = asyncio.run(read(url, 0.3))
        assert silent.kind == "timeout" and 0.3 <= time.monotonic() - began < 3.0
    with counting_server(lambda _: None) as (url, _):  # closes without answering
        assert asyncio.run(read(url, 5.0)).kind == "connection_dropped"
    with counting_server(lambda _: b"SMTP ready\r\n\r\n") as (url, _):  # not HTTP
        assert asyncio.run(read(url, 5.0)).kind == "connection_dropped"


def test_a_request_cancelled_while_waiting_for_a_connection_gives_its_turn_on() -> None:
    """At the limit, a request waits for a connection; cancelled while it waits (its task's
    timeout), the next one still gets the connection when it is free."""
    with counting_server(lambda _: RESPONSE) as (url, served):

        async def main() -> list[int]:
            pool = HttpClient(1)

            async def one() -> int:
                async with pool.post(url + "/v1", b"{}", {}, 5.0, lambda: None) as r:
                    await r.aread()
                    await asyncio.sleep(0.05)
                    return r.status_code

            first = asyncio.ensure_future(one())
            await asyncio.sleep(0.01)
            waiting = asyncio.ensure_future(one())
            await asyncio.sleep(0.01)
            waiting.cancel()
            try:
                return [await first, await one()]
            finally:
                await pool.aclose()

        assert asyncio.run(main()) == [200, 200]
    assert served == [2]
