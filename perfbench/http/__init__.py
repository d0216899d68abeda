"""The HTTP client beneath the targets: one seam, ``HttpClient.post``, sized for the planned
load (DESIGN §7).

Two backends, chosen by ``backend``:

- ``"h1"``, every real run's: perfbench's own HTTP/1.1 connections on asyncio, parsed by
  aiohttp's parser (``h1_backend``): at most ``concurrency`` keep-alive connections in use,
  with perfbench's measurement devices (arrival stamps, "sent" marked as the request is
  written). tests/conformance/test_servers.py holds it to uvicorn, hypercorn and granian.
- ``"httpx"``: httpx's own transport (``httpx_backend``), for trio (the tests' virtual time)
  and for a given httpx transport (respx's mocks, ``httpx.MockTransport``).

``"auto"`` (the default) is ``"h1"`` on asyncio without a transport, else ``"httpx"``; a test
that asks for ``"h1"`` gets it or an error, never httpx in its place. Why not httpx, nor
aiohttp's ClientSession, on asyncio: docs/architecture.md, "The HTTP client on asyncio".

Either way the body comes back as a ``Response`` (status, headers, ``aread``, ``aiter_bytes``),
and transport failures as ``CallFailed`` (``failures``: one map for both). No pool timeout: the
runner's deadline bounds every wait."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol

import httpx

from perfbench.errors import TargetError
from perfbench.http.failures import CallFailed, reraise
from perfbench.http.urls import reachable

if TYPE_CHECKING:
    from perfbench.http.h1_backend import H1Backend
    from perfbench.http.httpx_backend import HttpxBackend

__all__ = ["Backend", "CallFailed", "HttpClient", "Response"]

Backend = Literal["auto", "h1", "httpx"]


class Response(Protocol):
    """An HTTP response with its body unread, as ``HttpClient.post`` yields it: httpx's
    Response has this shape, and so does the asyncio backend's. ``arrived`` (asyncio only) is
    when the bytes last read arrived, on ``time.monotonic``."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    async def aread(self, limit: int = ...) -> bytes:
        """The whole body, decoded; past ``limit`` bytes (default ``limits.MAX_BODY``) or
        ``limits.MAX_RATIO``, a ``too_large`` CallFailed."""
        ...

    async def ahead(self, n: int) -> bytes:
        """The first ``n`` bytes of the body; the rest is not read."""
        ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


class HttpClient:
    def __init__(
        self,
        concurrency: int,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
        backend: Backend = "auto",
    ) -> None:
        if backend == "h1" and transport is not None:
            raise TargetError("an httpx transport needs the httpx backend: backend='httpx'")
        # Connections to keep open; 0: as many as the load needs (an open loop must never wait
        # on the client for a connection).
        self.concurrency = max(0, concurrency)
        self._transport = transport  # a test's mock transport wins over everything
        self._headers = headers
        self._asked = backend
        self._backend: H1Backend | HttpxBackend | None = None

    @property
    def backend(self) -> Literal["h1", "httpx"]:
        """The backend requests go through (decided on first use when asked for ``auto``)."""
        if self._backend is None:
            self._backend = self._build()
        from perfbench.http.h1_backend import H1Backend

        return "h1" if isinstance(self._backend, H1Backend) else "httpx"

    def prepare(self) -> None:
        """Build the clients now (in the event loop, before anything is measured): the first
        request would otherwise import aiohttp's parser and make the pool, 0.1–0.25 s counted in
        that task's latency (with --warmup 0, or the first task of a resumed pass)."""
        if self._backend is None:
            self._backend = self._build()

    def _build(self) -> H1Backend | HttpxBackend:
        asked, asyncio_ = self._asked, _on_asyncio()
        if asked == "h1" and not asyncio_:
            raise TargetError("the h1 HTTP client runs on asyncio only: backend='httpx' here")
        if asked == "h1" or (asked == "auto" and self._transport is None and asyncio_):
            from perfbench.http.h1_backend import H1Backend

            return H1Backend(self.concurrency, self._headers)
        from perfbench.http.httpx_backend import HttpxBackend

        return HttpxBackend(self.concurrency, self._transport, self._headers)

    def post(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> AbstractAsyncContextManager[Response]:  # fmt: skip
        """POST and yield the response with its body unread; ``sent`` is called when the
        request's headers have gone out. Transport failures raise ``CallFailed``, also those
        met reading the body inside the ``async with``."""
        if self._backend is None:
            self._backend = self._build()
        return _Mapped(self._backend.post(url, content, headers, read_timeout, sent), url)

    async def preflight(self, url: str) -> None:
        """Connect to ``url``'s host once (``urls.reachable``) when requests go out over real
        sockets (on asyncio). Under trio or with a given transport they go through
        httpx, whose transport may be a test's mock (respx): there is nothing to reach."""
        from perfbench.http.h1_backend import H1Backend

        if self._backend is None:
            self._backend = self._build()
        if isinstance(self._backend, H1Backend):
            await reachable(url)

    async def aclose(self) -> None:
        if self._backend is not None:
            await self._backend.aclose()
            self._backend = None


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Mapped:
    """A request's context, its transport failures raised as ``CallFailed``: a class rather
    than an ``asynccontextmanager`` (each request paid a generator, its frame and two
    ``contextlib`` calls: ~2 µs of the per-task budget, ``make profile``)."""

    __slots__ = ("_inner", "_url")

    def __init__(self, inner: AbstractAsyncContextManager[Response], url: str) -> None:
        self._inner, self._url = inner, url

    async def __aenter__(self) -> Response:
        try:
            return await self._inner.__aenter__()
        except Exception as exc:
            reraise(exc, self._url)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        try:
            if await self._inner.__aexit__(kind, exc, tb):
                return True
        except Exception as raised:
            reraise(raised, self._url)
        if isinstance(exc, Exception):
            reraise(exc, self._url)  # the body's own failure: as it is, or its CallFailed
        return False
