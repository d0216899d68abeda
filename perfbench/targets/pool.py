"""HTTP clients sized for the planned load (DESIGN §7), behind one seam: ``Pool.post``.

On asyncio (every real run) requests go straight through aiohttp: one connector holding
``concurrency`` keep-alive connections. Measured against the mock server on this machine
(``perfbench calibrate --path http``), the agent loop costs 0.25–0.40 ms of client CPU per
short call through it, against 0.65 ms through httpx with aiohttp as its transport and 2.7 ms
per streamed call through httpx's own transport, whose pool rescans every connection for every
queued request. An aiohttp trace callback marks the moment
request headers are sent (found through a context variable).

Elsewhere (trio, which the tests use for virtual time, and respx's mocks) it is httpx's own
transport: one client per ``SHARD`` in flight with ``max_connections ==
max_keepalive_connections`` (the default keeps 20 alive and opens a new connection per request
beyond that), and the least-busy client takes each request.

Either way the body comes back as a ``Response`` (status, headers, ``aread``,
``aiter_bytes``), and transport failures as ``ModelError``s of kind ``connect_error``,
``timeout`` or ``connection_dropped``. No pool timeout: the runner's deadline bounds every
wait."""

from __future__ import annotations

import asyncio
import collections.abc
import math
import sys
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import httpx

from perfbench.targets.chat import ModelError, Response

if TYPE_CHECKING:
    import aiohttp

SHARD = 16

# The callback to run when the current request's headers go out (set around each request).
on_sent: ContextVar[Callable[[], None] | None] = ContextVar("perfbench_on_sent", default=None)


class Pool:
    def __init__(
        self,
        concurrency: int,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        # Connections to keep open; 0: as many as the load needs (an open loop must never wait
        # on the client for a connection).
        self.concurrency = max(0, concurrency)
        self._transport = transport  # a test's mock transport wins over everything
        self._headers = headers
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, Any] = {}

    @asynccontextmanager
    async def post(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> AsyncIterator[Response]:  # fmt: skip
        """POST and yield the response with its body unread; ``sent`` is called when the
        request's headers have gone out."""
        if self._session is None and not self._clients:
            self._build()
        if self._session is not None:
            async with self._aiohttp(url, content, headers, read_timeout, sent) as response:
                yield response
        else:
            async with self._httpx(url, content, headers, read_timeout, sent) as response:
                yield response

    def _build(self) -> None:
        if self._transport is None and _on_asyncio():
            self._session = _aiohttp_session(self.concurrency, self._headers)
            return
        shards = max(1, math.ceil(self.concurrency / SHARD))
        per = math.ceil(self.concurrency / shards) or None  # None: httpx's "no limit"
        limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
        timeout = httpx.Timeout(connect=10.0, read=None, write=10.0, pool=None)
        self._clients = [
            httpx.AsyncClient(
                limits=limits,
                timeout=timeout,
                transport=self._transport,
                headers=self._headers,
                follow_redirects=False,
            )
            for _ in range(shards)
        ]
        self._busy = [0] * len(self._clients)

    @asynccontextmanager
    async def _aiohttp(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> AsyncIterator[Response]:  # fmt: skip
        import aiohttp

        assert self._session is not None
        timeout = self._timeouts.get(read_timeout)
        if timeout is None:  # one object per distinct timeout, not one per request
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout)
            self._timeouts[read_timeout] = timeout
        token = on_sent.set(sent)
        try:
            async with self._session.post(
                url, data=content, headers=headers, timeout=timeout
            ) as response:
                yield _AiohttpResponse(response)
        except aiohttp.ClientConnectorError as exc:
            raise ModelError("connect_error", f"cannot connect to {url}: {exc}") from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise ModelError("timeout", f"{type(exc).__name__} from {url}") from exc
        except aiohttp.ClientError as exc:  # dropped mid-body, reset, not HTTP at all…
            raise ModelError("connection_dropped", f"connection dropped: {exc!r}") from exc
        finally:
            on_sent.reset(token)

    @asynccontextmanager
    async def _httpx(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> AsyncIterator[Response]:  # fmt: skip
        async def trace(name: str, info: dict[str, Any]) -> None:
            if name == "http11.send_request_headers.started":
                sent()

        timeout = httpx.Timeout(connect=10.0, read=read_timeout, write=10.0, pool=None)
        i = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[i] += 1
        try:
            async with self._clients[i].stream(
                "POST",
                url,
                content=content,
                headers=dict(headers),
                timeout=timeout,
                extensions={"trace": trace},
            ) as response:
                yield response
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ModelError("connect_error", f"cannot connect to {url}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ModelError("timeout", f"{type(exc).__name__} from {url}") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise ModelError("connection_dropped", f"connection dropped: {exc}") from exc
        finally:
            self._busy[i] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients = []
        if self._session is not None:
            await self._session.close()
            self._session = None


class _AiohttpResponse:
    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status_code(self) -> int:
        return self._response.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    async def aread(self) -> bytes:
        return await self._response.read()

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_any()


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _aiohttp_session(concurrency: int, headers: dict[str, str] | None) -> aiohttp.ClientSession:
    import aiohttp

    async def headers_sent(session: Any, context: SimpleNamespace, params: Any) -> None:
        callback = on_sent.get()
        if callback is not None:
            callback()

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(headers_sent)
    connector = aiohttp.TCPConnector(
        limit=concurrency,
        limit_per_host=concurrency,
        keepalive_timeout=60,  # 0: no limit
    )
    return aiohttp.ClientSession(
        connector=connector,
        trace_configs=[trace],
        headers=headers,
        auto_decompress=True,
        request_class=_request_class(),
    )


def _request_class() -> type[aiohttp.ClientRequest]:
    """aiohttp's request, writing its body at once on Python 3.11 as it does on 3.12+.

    aiohttp buffers a request's headers and sends them with the body from a new task; on 3.12+
    that task starts eagerly, on 3.11 it waits behind every callback already queued. Measured at
    64 streams in flight, that held requests 1 ms at the median and up to 36 ms at P99 after
    perfbench had marked them sent (``tests/bench/client_figures.py --errors``): the client's
    own delay, counted as the server's TTFT."""
    import aiohttp

    if sys.version_info >= (3, 12):
        return aiohttp.ClientRequest

    class EagerRequest(aiohttp.ClientRequest):
        def write_bytes(self, *args: Any, **kwargs: Any) -> Any:
            return _Started(super().write_bytes(*args, **kwargs))

    return EagerRequest


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
