"""HTTP clients sized for the planned load (DESIGN §7), behind one seam.

On asyncio (every real run) requests go through httpx with aiohttp as its transport
(httpx-aiohttp): against the mock server at 64 in flight it cost 1.1–1.6 ms of client CPU per
streamed call, against 2.7 ms for httpx's own transport, whose pool rescans every connection
for every queued request. One aiohttp connector holds ``concurrency`` keep-alive connections.
aiohttp has no httpx trace hook, so an aiohttp trace callback marks the moment request
headers are sent, finding the model call through a context variable.

Elsewhere (trio, which the tests use for virtual time) it is httpx's own transport: one client
per ``SHARD`` in flight with ``max_connections == max_keepalive_connections`` (the default
keeps 20 alive and opens a new connection per request beyond that), and the least-busy client
takes each request. No pool timeout: the runner's deadline bounds every wait."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

import httpx

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
        self.concurrency = max(1, concurrency)
        self._transport = transport  # a test's mock transport wins over everything
        self._headers = headers
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []
        self.uses_trace_hook = True  # httpx's trace extension reports the send

    def _build(self) -> None:
        timeout = httpx.Timeout(connect=10.0, read=None, write=10.0, pool=None)
        if self._transport is None and _on_asyncio():
            self._clients = [
                httpx.AsyncClient(
                    transport=_aiohttp(self.concurrency), timeout=timeout, headers=self._headers
                )
            ]
            self.uses_trace_hook = False
        else:
            shards = max(1, math.ceil(self.concurrency / SHARD))
            per = max(1, math.ceil(self.concurrency / shards))
            limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
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
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        if not self._clients:
            self._build()
        i = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[i] += 1
        try:
            yield self._clients[i]
        finally:
            self._busy[i] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients = []


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _aiohttp(concurrency: int) -> httpx.AsyncBaseTransport:
    import aiohttp
    from httpx_aiohttp import AiohttpTransport

    async def headers_sent(session: Any, context: SimpleNamespace, params: Any) -> None:
        callback = on_sent.get()
        if callback is not None:
            callback()

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(headers_sent)

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=concurrency, limit_per_host=concurrency, keepalive_timeout=60
        )
        return aiohttp.ClientSession(
            connector=connector, trace_configs=[trace], auto_decompress=True
        )

    transport: httpx.AsyncBaseTransport = AiohttpTransport(client=session)
    return transport
