"""The HTTP client on asyncio: aiohttp, with perfbench's measurement devices.

This file holds every use of aiohttp's private hooks, so that an aiohttp release that moves
one breaks one file, and ``tests/unit/test_pool.py`` says which (the connector's protocol
factory ``_factory``, ``aiohttp.client_proto.ResponseHandler``, ``ClientRequest.write_bytes``).
``pyproject.toml`` bounds aiohttp to the releases these were checked on.

- ``StampingHandler``: the connection's protocol notes when body bytes *arrive*, before any
  task runs, so tokens are timed from their arrival, not from when a busy client read them;
- the request class marks "sent" as aiohttp calls ``write_bytes`` (a ``TraceConfig`` cost
  ~10% of the client's CPU per short call) and, on Python 3.11, writes at once (``_Started``);
- ``stamps.SocketStamps`` polls the pool's sockets between perfbench's own steps.
"""

from __future__ import annotations

import asyncio
import collections.abc
import functools
import sys
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from perfbench.http.failures import CallFailed
from perfbench.http.limits import MAX_BODY, check_ratio, read_bounded, read_head, too_large
from perfbench.http.stamps import SocketStamps, StampedProtocol

if TYPE_CHECKING:
    import aiohttp


# Bytes a body's reads may take before the loop runs again and the ratio is checked (1,000-
# token streams are ~0.2 MiB: they never pay for it).
_CHECK_EVERY = 2**20


class _Exchange:
    """What perfbench's request class learns of the request in progress (set around each
    request; aiohttp's writer task sees it too, its context being a copy)."""

    __slots__ = ("protocol", "sent")

    def __init__(self, sent: Callable[[], None]) -> None:
        self.sent = sent  # called when the request's headers go out
        self.protocol: Any = None  # the connection's protocol, kept past aiohttp's release


exchange: ContextVar[_Exchange | None] = ContextVar("perfbench_exchange", default=None)


class AiohttpBackend:
    """One connector of ``concurrency`` keep-alive connections (0: no limit)."""

    def __init__(self, concurrency: int, headers: dict[str, str] | None) -> None:
        self._stamps = SocketStamps()
        self._session = _aiohttp_session(concurrency, headers, self._stamps)
        self._timeouts: dict[float, Any] = {}

    def post(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> _Post:  # fmt: skip
        import aiohttp

        timeout = self._timeouts.get(read_timeout)
        if timeout is None:  # one object per distinct timeout, not one per request
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout)
            self._timeouts[read_timeout] = timeout
        # No redirects, as on httpx: they would add latency.
        request = self._session.post(
            url, data=content, headers=headers, timeout=timeout, allow_redirects=False
        )
        return _Post(request, _Exchange(sent))

    async def aclose(self) -> None:
        await self._session.close()
        self._stamps.close()


class _Post:
    """One request's context: the exchange set for perfbench's request class while it is in
    progress, aiohttp's response adapted. A class, not an ``asynccontextmanager``: one
    generator and two ``contextlib`` calls less per request."""

    __slots__ = ("_current", "_request", "_token")

    def __init__(self, request: Any, current: _Exchange) -> None:
        self._request, self._current = request, current

    async def __aenter__(self) -> _AiohttpResponse:
        self._token = exchange.set(self._current)
        try:
            response = await self._request.__aenter__()
        except BaseException:
            exchange.reset(self._token)
            raise
        return _AiohttpResponse(response, self._current.protocol)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._request.__aexit__(kind, exc, tb)
        finally:
            exchange.reset(self._token)


class _AiohttpResponse:
    __slots__ = ("_protocol", "_response", "arrived", "headers_at")

    def __init__(self, response: aiohttp.ClientResponse, protocol: Any) -> None:
        self._response = response
        # When the bytes of the chunk last read arrived (time.monotonic), as the connection's
        # protocol saw them: None when the connection is not one of ours. The protocol comes
        # from the request, not ``response.connection``: aiohttp detaches the connection once
        # the body is complete, so a reply that arrived whole before perfbench looked (98–99.96%
        # of them on Python 3.12) lost its stamps and was timed when read.
        self.arrived: float | None = None
        self._protocol: Any = protocol if hasattr(protocol, "watched") else None
        # When the headers arrived: with the latest bytes the connection had when they were
        # parsed (a busy client gets to them later).
        self.headers_at = self._protocol.last if self._protocol is not None else None

    @property
    def status_code(self) -> int:
        return self._response.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    async def aread(self, limit: int = MAX_BODY) -> bytes:
        """The whole body, decoded, up to ``limit`` bytes (``http/limits.py``)."""
        response = self._response
        length = response.content_length
        if length is not None and length > limit:
            response.close()
            raise too_large("the body", limit)
        if length is not None and "content-encoding" not in response.headers:
            body = await response.read()  # its size is known and bounded: one read
        else:  # chunked or compressed: counted as it is decoded
            try:
                body = await read_bounded(response.content.iter_any(), limit, self._compressed)
            except CallFailed:
                response.close()  # the rest is never read: the connection cannot be reused
                raise
        if self._protocol is not None:  # the whole body is in: its last bytes came last
            self._protocol.poll()
            self.arrived = self._protocol.last
        return body

    async def ahead(self, n: int) -> bytes:
        """The first ``n`` bytes of the body (a refused answer's excerpt); the rest unread."""
        head, whole = await read_head(self._response.content.iter_any(), n)
        if not whole:
            self._response.close()
        return head

    def _compressed(self) -> int | None:
        got: int | None = getattr(self._response.content, "total_compressed_bytes", None)
        return got

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        if self._protocol is None:
            return self._response.content.iter_any()
        return self._stamped()

    async def _stamped(self) -> AsyncIterator[bytes]:
        protocol, content = self._protocol, self._response.content
        # Body bytes that came before the watch (with the headers, or while this task waited
        # for its turn) arrived at the latest with the last bytes the connection received.
        protocol.arrived = protocol.last if content.total_bytes else None
        protocol.watched = content
        unchecked = 0
        try:
            while chunk := await content.readany():
                protocol.poll()  # before this task's work on the chunk holds the loop
                self.arrived, protocol.arrived = protocol.arrived, None
                yield chunk
                unchecked += len(chunk)
                if unchecked > _CHECK_EVERY:  # a long or bombed body: never a short stream
                    unchecked = 0
                    check_ratio(content.total_bytes, self._compressed())
                    # A body decoded faster than it is read is read without the loop running:
                    # no timeout could fire, no other task run. Let the loop run.
                    await asyncio.sleep(0)
        finally:
            protocol.watched = None


def _aiohttp_session(
    concurrency: int, headers: dict[str, str] | None, stamps: SocketStamps
) -> aiohttp.ClientSession:
    import aiohttp

    connector = _connector_class(stamps)(
        limit=concurrency,
        limit_per_host=concurrency,
        keepalive_timeout=60,  # 0: no limit
    )
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        auto_decompress=True,
        request_class=_request_class(stamps),
    )


def _connector_class(stamps: SocketStamps) -> type[aiohttp.TCPConnector]:
    """aiohttp's connector, making connections whose protocol notes when body bytes arrive.

    The loop hands a connection its bytes as soon as the socket is readable, before any task
    runs; the task reading them may run much later, behind every other task woken in the same
    loop pass. At 64 streams in flight, a closed loop's tasks end and restart in waves, and a
    first token read behind a wave was timed up to 24 ms late at P99 (``tests/bench/
    client_figures.py --errors``). Timing tokens from the arrival instead leaves perfbench's
    own processing out of TTFT and inter-token gaps; the task's end-to-end latency keeps it.
    The arrival is the first moment perfbench saw the bytes waiting (``stamps``), which it
    checks between its own steps, not only when the loop next polls."""
    import aiohttp
    from aiohttp.client_proto import ResponseHandler

    class StampingHandler(StampedProtocol, ResponseHandler):
        last = 0.0  # when bytes last arrived, on time.monotonic
        arrived: float | None = None  # when the first bytes not yet read arrived
        watched: aiohttp.StreamReader | None = None  # the body being read
        poll = stamps.poll

        def data_received(self, data: bytes) -> None:
            if not data:  # aiohttp resuming a paused read: nothing arrived
                super().data_received(data)
                return
            now = self.last = self.stamps.arrived(self)
            body = self.watched
            if body is None or self.arrived is not None:
                super().data_received(data)
                return
            before = body.total_bytes
            super().data_received(data)
            if body.total_bytes != before:
                self.arrived = now

    StampingHandler.stamps = stamps

    class StampingConnector(aiohttp.TCPConnector):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            # The one seam aiohttp offers for the protocol class (private; a test fails if an
            # aiohttp release renames it, and tokens are then timed when read, as before).
            factory = functools.partial(StampingHandler, loop=self._loop)
            self._factory = cast("functools.partial[ResponseHandler]", factory)

    return StampingConnector


def _request_class(stamps: SocketStamps) -> type[aiohttp.ClientRequest]:
    """aiohttp's request, calling ``sent`` as it goes out and, on Python 3.11, writing it at
    once as aiohttp does on 3.12+.

    ``write_bytes`` is called as the request leaves: its headers are buffered and its body is
    next. Marking "sent" there, rather than through an aiohttp ``TraceConfig``, spares every
    request the trace machinery (a dozen signal sends; ~10% of the client's CPU per short call).

    aiohttp buffers a request's headers and sends them with the body from a new task; on 3.12+
    that task starts eagerly, on 3.11 it waits behind every callback already queued. Measured at
    64 streams in flight, that held requests 1 ms at the median and up to 36 ms at P99 after
    perfbench had marked them sent (``tests/bench/client_figures.py --errors``): the client's
    own delay, counted as the server's TTFT."""
    import aiohttp

    eager = sys.version_info >= (3, 12)

    class Request(aiohttp.ClientRequest):
        def write_bytes(self, *args: Any, **kwargs: Any) -> Any:
            stamps.poll()
            current = exchange.get()
            if current is not None:
                current.sent()
            coro = super().write_bytes(*args, **kwargs)
            return coro if eager else _Started(coro)

        async def send(self, conn: Any) -> aiohttp.ClientResponse:
            current = exchange.get()
            if current is not None:
                current.protocol = conn.protocol
            response = await super().send(conn)
            if not eager:
                _forget_finished_writer(response)
            return response

    return Request


def _forget_finished_writer(response: aiohttp.ClientResponse) -> None:
    """Python 3.11: the body went out eagerly (``_Started``), but aiohttp's writer *task* is
    not done until its first step runs, and its done-callback later still: a response read
    before then releases its connection only after them. At the client's ceiling that deferred
    72–75% of releases, and a slot's next task found no free connection in a pool sized to the
    concurrency (waits up to 0.95 s at 64 in flight, counted as its latency). On 3.12 aiohttp
    drops a writer task done at once; this does the same when the eager step finished it."""
    task = response._writer
    coro = task.get_coro() if task is not None else None
    if isinstance(coro, _Started) and coro.finished:
        # aiohttp's own reset, as the task's done-callback would run it (private: pinned, and
        # tests/unit/test_pool.py fails when an aiohttp release renames it).
        response._ClientResponse__reset_writer()  # type: ignore[attr-defined]


class _Started(collections.abc.Coroutine[Any, Any, Any]):
    """A coroutine run up to its first suspension on creation (3.12's ``eager_start``, by
    hand): the task later made from it resumes where that step stopped, or sees its result."""

    __slots__ = ("_coro", "_first", "_outcome", "_pending")

    def __init__(self, coro: collections.abc.Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self._first: Any = None  # what the first suspension yielded (a future, or None)
        self._outcome: BaseException | None = None  # StopIteration: it finished eagerly
        self._pending = True  # the task has not taken its first step yet
        try:
            self._first = coro.send(None)
        except BaseException as exc:  # handed to the task, which raises it where it belongs
            self._outcome = exc

    @property
    def finished(self) -> bool:
        """It ran to its end in the eager step, without an error: the task has nothing left
        to do but take that result."""
        return self._pending and isinstance(self._outcome, StopIteration)

    def send(self, value: Any) -> Any:
        if self._pending:
            self._pending = False
            if self._outcome is not None:
                outcome, self._outcome = self._outcome, None
                raise outcome
            return self._first  # the task waits on what the coroutine was waiting on
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._pending, self._outcome = False, None
        return self._coro.throw(typ, val, tb) if val is not None else self._coro.throw(typ)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self  # type: ignore[return-value]
