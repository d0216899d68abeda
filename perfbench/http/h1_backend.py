"""The HTTP client on asyncio: HTTP/1.1 over perfbench's own keep-alive connections, each
response parsed by aiohttp's parser (llhttp, in C) into aiohttp's stream reader.

Why not aiohttp's ``ClientSession``: on a short exchange its request machinery (URL and
header objects, the request and response classes, the connector's bookkeeping, a writer task)
cost 70.9 µs of client CPU a request where these connections, handing the bytes to the same
parser, cost 38.1 with perfbench's stamps and timeout (``python tests/bench/http_clients.py``,
64 in flight, the mock on the other core; the Rust-backed rnet 51.4, pyreqwest 45.5): at a
short task's ceiling the client's own request cost more than everything perfbench measures.
What perfbench needs of a client is narrow: POST, keep-alive, a read timeout, bounded reads,
and its measurement devices, which a protocol of its own carries (aiohttp's parser, stream
reader and protocol class; four underscore names of aiohttp's, pinned with what each is for by
``PRIVATE`` in tests/unit/test_pool.py):

- the connection's protocol notes when body bytes *arrive* (``stamps.SocketStamps``, polled
  between perfbench's steps), so tokens are timed from their arrival, not from when a busy
  client got to them;
- "sent" is marked as the request is written, and the request is written at once (aiohttp
  wrote it from a task of its own, behind every callback already queued: on Python 3.11 up to
  36 ms late at P99 at 64 streams in flight);
- the headers are timed from the bytes that completed them.

What aiohttp does that this does not: redirects (perfbench follows none), proxies from the
environment (aiohttp's default, ``trust_env=False``, took none either), cookies, HTTP/2 (aiohttp
has none). Responses are decoded as aiohttp decodes them (gzip, deflate, and brotli or zstd
when their packages are installed).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import functools
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any

from aiohttp.base_protocol import BaseProtocol
from aiohttp.client_exceptions import (
    ClientPayloadError,
    ServerDisconnectedError,
    ServerTimeoutError,
)
from aiohttp.client_reqrep import _gen_default_accept_encoding
from aiohttp.http_parser import HttpResponseParser
from aiohttp.streams import StreamReader

from perfbench.http.failures import CallFailed
from perfbench.http.limits import MAX_BODY, check_ratio, read_bounded, read_head, too_large
from perfbench.http.stamps import SocketStamps, StampedProtocol
from perfbench.http.urls import public_url
from perfbench.version import __version__

CONNECT_S = 10.0  # how long a new connection may take (aiohttp's sock_connect before)
KEEPALIVE_S = 60.0  # an idle connection older than this is closed, not reused
# How long closing the client waits for its connections to go: a TLS connection's socket closes
# after the close_notify exchange, and a loop that ends first leaves it open (and warns).
CLOSE_S = 2.0
# Bytes a body's reads may take before the loop runs again and the ratio is checked (1,000-
# token streams are ~0.2 MiB: they never pay for it).
_CHECK_EVERY = 2**20
_READ_LIMIT = 2**16  # the stream reader's buffer before it pauses the socket (aiohttp's)
_URLS = 1024  # parsed URLs kept; a proxy forwarding arbitrary paths starts over past it
_HEADS = 256  # requests' heads kept


class H1Backend:
    """Keep-alive connections to each host, at most ``concurrency`` in use at once (0: no
    limit: an open loop must never wait on the client for a connection)."""

    def __init__(self, concurrency: int, headers: dict[str, str] | None) -> None:
        self._stamps = SocketStamps()
        self._pool = _Pool(concurrency, self._stamps)
        self._defaults = _default_headers(headers)
        self._urls: dict[str, _Url] = {}
        # A request's line and headers, by URL and headers as given: the same few each run
        # (a seeded mock's per-call key makes each one new; past _HEADS it starts over).
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}

    def post(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> _Post:  # fmt: skip
        target = self._urls.get(url)
        if target is None:
            if len(self._urls) >= _URLS:
                self._urls.clear()
            target = self._urls[url] = _Url.parse(url)
        key = (url, tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) >= _HEADS:
                self._heads.clear()
            head = self._heads[key] = _request_head(target, self._defaults, headers)
        request = b"%scontent-length: %d\r\n\r\n%s" % (head, len(content), content)
        return _Post(self._pool, target, request, read_timeout, sent)

    async def aclose(self) -> None:
        await self._pool.close()
        self._stamps.close()


class _Url:
    """What a request needs of its URL, parsed once: the connection's key and the request
    line's target, percent-encoded as aiohttp (yarl) encodes it."""

    __slots__ = ("auth", "host", "host_header", "key", "port", "public", "target", "tls")

    def __init__(self, host: str, port: int, tls: bool, host_header: str, target: str) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.key = (host, port, tls)
        self.host_header, self.target = host_header, target
        self.public = ""
        self.auth: str | None = None  # Basic credentials from the URL's user:password@

    @classmethod
    def parse(cls, url: str) -> _Url:
        from yarl import URL

        parsed = URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.raw_host:
            raise ValueError(f"not an http(s) URL: {public_url(url)}")
        tls = parsed.scheme == "https"
        port = parsed.port or (443 if tls else 80)
        host = parsed.raw_host
        shown = f"[{host}]" if ":" in host else host
        host_header = shown if parsed.is_default_port() else f"{shown}:{port}"
        made = cls(host, port, tls, host_header, parsed.raw_path_qs or "/")
        made.public = public_url(url)
        if parsed.user is not None:  # as aiohttp took them: Basic, unless a header says
            pair = f"{parsed.user}:{parsed.password or ''}".encode()
            made.auth = "Basic " + base64.b64encode(pair).decode("ascii")
        return made


def _default_headers(session: dict[str, str] | None) -> dict[str, str]:
    """The headers every request carries unless it sets its own (lower-cased names): what
    aiohttp sent, with perfbench named as the user agent."""
    defaults = {
        "accept": "*/*",
        "accept-encoding": _gen_default_accept_encoding(),
        "user-agent": f"perfbench/{__version__}",
    }
    for name, value in (session or {}).items():
        defaults[name.lower()] = value
    return defaults


def _request_head(url: _Url, defaults: Mapping[str, str], headers: Mapping[str, str]) -> bytes:
    """The request line and headers of a POST, but its length. A header that would split the
    request (a CR or LF in it) is refused, as aiohttp refused it."""
    merged = dict(defaults)
    if url.auth is not None:
        merged["authorization"] = url.auth
    for name, value in headers.items():
        merged[name.lower()] = value
    merged.pop("host", None)
    merged.pop("content-length", None)
    merged.pop("transfer-encoding", None)
    lines = [f"POST {url.target} HTTP/1.1\r\nhost: {url.host_header}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in merged.items())
    text = "".join(lines)
    if text.count("\n") != len(merged) + 2 or text.count("\r") != len(merged) + 2:
        raise ValueError("a header name or value holds a CR or LF: it would split the request")
    return text.encode()  # UTF-8, as aiohttp wrote headers


class _Pool:
    """Idle connections by (host, port, tls), newest first; at most ``limit`` in use, the
    rest waiting their turn in order."""

    __slots__ = ("_idle", "_in_use", "_limit", "_open", "_stamps", "_waiters")

    def __init__(self, limit: int, stamps: SocketStamps) -> None:
        self._limit = max(0, limit)
        self._stamps = stamps
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        self._in_use = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._open: set[_Connection] = set()  # every connection whose socket is not yet closed

    async def acquire(self, url: _Url) -> _Connection:
        if self._limit and self._in_use >= self._limit:
            await self._wait()
        else:
            self._in_use += 1
        try:
            return self._idle_one(url) or await self._connect(url)
        except BaseException:
            self._give_back()
            raise

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # a release hands its place over: _in_use stays as it is
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._give_back()  # handed a place as it was cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def _idle_one(self, url: _Url) -> _Connection | None:
        idle = self._idle.get(url.key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.reusable() and now - conn.idle_since < KEEPALIVE_S:
                return conn
            conn.close()
        return None

    async def _connect(self, url: _Url) -> _Connection:
        loop = asyncio.get_running_loop()
        factory = functools.partial(_Connection, loop, self._stamps)
        try:
            async with asyncio.timeout(CONNECT_S):
                _, conn = await loop.create_connection(
                    factory, url.host, url.port, ssl=_tls() if url.tls else None,
                    server_hostname=url.host if url.tls else None,
                )  # fmt: skip
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            why = f"no connection within {CONNECT_S:g} s" if isinstance(exc, TimeoutError) else exc
            raise CallFailed("connect_error", f"cannot connect to {url.public}: {why}") from exc
        self._open.add(conn)
        conn.lost.add_done_callback(lambda _: self._open.discard(conn))
        return conn

    def release(self, conn: _Connection, url: _Url, reuse: bool) -> None:
        if reuse and conn.reusable():
            conn.idle_since = time.monotonic()
            self._idle.setdefault(url.key, []).append(conn)
        else:
            conn.close()
        self._give_back()

    def _give_back(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._in_use -= 1

    async def close(self) -> None:
        """Close every connection, and wait until their sockets are (at most ``CLOSE_S``;
        then they are aborted)."""
        self._idle.clear()
        going = list(self._open)
        for conn in going:
            conn.close()
        if going:
            await asyncio.wait([conn.lost for conn in going], timeout=CLOSE_S)
        for conn in going:
            if not conn.lost.done() and conn.transport is not None:
                conn.transport.abort()


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


class _Connection(StampedProtocol, BaseProtocol):
    """One keep-alive connection: writes a request, parses the response as it arrives, notes
    when its bytes came, and fails the exchange when the server stops sending for the read
    timeout or drops the connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stamps: SocketStamps) -> None:
        super().__init__(loop)
        self.stamps = stamps
        self._response_parser = HttpResponseParser(
            self, loop, _READ_LIMIT, payload_exception=ClientPayloadError,
            read_until_eof=True, auto_decompress=True,
        )  # fmt: skip
        self._parser = self._response_parser  # flow control pauses it (aiohttp's BaseProtocol)
        self._waiter: asyncio.Future[tuple[Any, StreamReader]] | None = None
        self.payload: StreamReader | None = None
        self.should_close = False
        self.closed = False
        self.idle_since = 0.0
        self.last = 0.0  # when bytes last arrived, on time.monotonic
        self.head_at = 0.0  # when the bytes that completed the response's headers arrived
        self.arrived: float | None = None  # when the first body bytes not yet read arrived
        self.watched: StreamReader | None = None  # the body being read, chunk by chunk
        self._timeout = 0.0  # the read timeout of the exchange in progress
        self._active = 0.0  # when it last heard from the server (or sent), on the loop's clock
        self._timing = False  # an exchange is waiting on the server
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.lost: asyncio.Future[None] = loop.create_future()  # done when the socket is closed

    # -- an exchange

    async def exchange(self, request: bytes, read_timeout: float) -> tuple[Any, StreamReader]:
        """Write ``request`` and wait for the response's headers."""
        transport = self.transport
        if transport is None or self.closed:
            raise _dropped("the connection closed before the request was sent")
        waiter: asyncio.Future[tuple[Any, StreamReader]] = self._loop.create_future()
        self._waiter = waiter
        self.payload = None
        self._timeout = read_timeout
        self._active = now = self._loop.time()  # the read timeout counts from the request
        self._timing = True
        if self._timer is None or self._timer_at > now + read_timeout:
            self._disarm()
            self._arm(now + read_timeout)
        transport.write(request)
        return await waiter

    def reusable(self) -> bool:
        """Open, between exchanges, and the last response read to its end: bytes left unread
        would be taken for the next response's."""
        return (
            not self.closed and not self.should_close and self.transport is not None
            and self._waiter is None and (self.payload is None or self.payload.is_eof())
        )  # fmt: skip

    def done(self) -> None:
        """The exchange is over (its body read, or abandoned). Its timer stays: the next
        exchange's due is later still, and a timer that fires early is re-armed once."""
        self._timing = False
        self._waiter = None
        self.watched = None

    def close(self) -> None:
        self.closed = True
        self._disarm()
        if self.transport is not None:
            self.transport.close()

    # -- the read timeout: one timer a connection, re-armed only when it fires early (a timer
    #    made and cancelled per exchange was a tenth of the client's own cost a short request)

    def _arm(self, at: float) -> None:
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if not self._timing or self.closed or (self.payload is not None and self.payload.is_eof()):
            return  # nothing awaited from the server: the next exchange arms a timer of its own
        now = self._loop.time()
        due = self._active + self._timeout
        if self._reading_paused or due > now:  # a paused read is perfbench's wait, not theirs
            self._arm(max(due, now + 0.001))
            return
        self._fail(ServerTimeoutError(f"no bytes for {self._timeout:g} s (the read timeout)"))
        self.close()

    # -- asyncio's protocol

    def data_received(self, data: bytes) -> None:
        if data:
            now = self.last = self.stamps.arrived(self)
            self._active = self._loop.time()
        else:  # the stream reader resuming a paused decompression: nothing arrived
            now = self.last
        body = self.watched
        before = body.total_bytes if body is not None and self.arrived is None else -1
        try:
            messages, _, _ = self._response_parser.feed_data(data)
        except Exception as exc:  # not HTTP, a bad chunk, headers too large: the message says
            self._fail(ClientPayloadError(f"not a valid HTTP response: {_what(exc)}"))
            self.close()
            return
        for message, payload in messages:
            if 100 <= message.code < 200 and message.code != 101:
                continue  # 100 Continue, 103 Early Hints: the answer follows (as aiohttp skips)
            waiter = self._waiter
            if waiter is None or waiter.done():  # bytes nobody asked for: not a keep-alive peer
                self.close()
                return
            self.head_at = now
            self.should_close = self.should_close or message.should_close
            self.payload = payload
            waiter.set_result((message, payload))
        if before >= 0 and body is not None and body.total_bytes != before:
            self.arrived = now

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self._disarm()
        try:
            self._response_parser.feed_eof()  # a body read until the connection closed ends here
        except Exception as incomplete:
            why = _what(incomplete) + (f" ({_what(exc)})" if exc is not None else "")
            self._fail(ClientPayloadError(f"the response ended early: {why}"))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(_dropped("the server closed the connection", exc))
        if not self.lost.done():
            self.lost.set_result(None)
        super().connection_lost(exc)

    def _fail(self, exc: BaseException) -> None:
        """The exchange in progress fails with ``exc``: its wait for the headers, else its
        body's reads."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        elif self.payload is not None and not self.payload.is_eof():
            self.payload.set_exception(exc)


def _dropped(why: str, cause: BaseException | None = None) -> Exception:
    return ServerDisconnectedError(f"{why}: {_what(cause)}" if cause is not None else why)


def _what(exc: BaseException) -> str:
    """An exception's type and own words (a parser error's ``message``), never its repr."""
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) else str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Post:
    """One request's context: a connection taken from the pool, the request written, the
    response's headers awaited; the connection given back, reusable when its body was read
    to its end."""

    __slots__ = ("_conn", "_pool", "_read_timeout", "_request", "_sent", "_url")

    def __init__(
        self, pool: _Pool, url: _Url, request: bytes, read_timeout: float,
        sent: Callable[[], None],
    ) -> None:  # fmt: skip
        self._pool, self._url, self._request = pool, url, request
        self._read_timeout, self._sent = read_timeout, sent
        self._conn: _Connection | None = None

    async def __aenter__(self) -> H1Response:
        conn = self._conn = await self._pool.acquire(self._url)
        try:
            conn.stamps.poll()
            self._sent()
            message, payload = await conn.exchange(self._request, self._read_timeout)
        except BaseException:
            self._conn = None
            conn.done()
            self._pool.release(conn, self._url, reuse=False)
            raise
        return H1Response(message, payload, conn)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done()
            # Reused only when this response was read to its end: bytes left unread would be
            # taken for the next response's.
            self._pool.release(conn, self._url, reuse=True)


class H1Response:
    """A response with its body unread, as ``perfbench.http.Response``."""

    __slots__ = ("_conn", "_message", "_payload", "arrived", "headers_at")

    def __init__(self, message: Any, payload: StreamReader, conn: _Connection) -> None:
        self._message, self._payload, self._conn = message, payload, conn
        self.arrived: float | None = None  # when the bytes last read arrived
        self.headers_at: float | None = conn.head_at  # when the headers did

    @property
    def status_code(self) -> int:
        code: int = self._message.code
        return code

    @property
    def headers(self) -> Mapping[str, str]:
        headers: Mapping[str, str] = self._message.headers
        return headers

    async def aread(self, limit: int = MAX_BODY) -> bytes:
        """The whole body, decoded, up to ``limit`` bytes (``http/limits.py``)."""
        headers, payload = self._message.headers, self._payload
        length = headers.get("content-length")
        known = int(length) if length is not None and length.isdigit() else None
        if known is not None and known > limit:
            self._conn.close()
            raise too_large("the body", limit)
        if known is not None and "content-encoding" not in headers:
            body: bytes = await payload.read()  # its size is known and bounded: one read
        else:  # chunked or compressed: counted as it is decoded
            try:
                body = await read_bounded(payload.iter_any(), limit, self._compressed)
            except CallFailed:
                self._conn.close()  # the rest is never read: the connection cannot be reused
                raise
        conn = self._conn
        conn.stamps.poll()  # the whole body is in: its last bytes came last
        self.arrived = conn.last
        return body

    async def ahead(self, n: int) -> bytes:
        """The first ``n`` bytes of the body (a refused answer's excerpt); the rest unread."""
        head, whole = await read_head(self._payload.iter_any(), n)
        if not whole:
            self._conn.close()
        return head

    def _compressed(self) -> int | None:
        got: int | None = getattr(self._payload, "total_compressed_bytes", None)
        return got

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return self._stamped()

    async def _stamped(self) -> AsyncIterator[bytes]:
        conn, content = self._conn, self._payload
        # Body bytes that came before the watch (with the headers, or while this task waited
        # for its turn) arrived at the latest with the last bytes the connection received.
        conn.arrived = conn.last if content.total_bytes else None
        conn.watched = content
        unchecked = 0
        try:
            while chunk := await content.readany():
                conn.stamps.poll()  # before this task's work on the chunk holds the loop
                self.arrived, conn.arrived = conn.arrived, None
                yield chunk
                unchecked += len(chunk)
                if unchecked > _CHECK_EVERY:  # a long or bombed body: never a short stream
                    unchecked = 0
                    check_ratio(content.total_bytes, self._compressed())
                    # A body decoded faster than it is read is read without the loop running:
                    # no timeout could fire, no other task run. Let the loop run.
                    await asyncio.sleep(0)
        finally:
            conn.watched = None
