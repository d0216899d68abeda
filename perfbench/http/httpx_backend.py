"""The HTTP client under trio (the tests' virtual time) and respx's mocks: httpx's own
transport, one client per ``SHARD`` in flight with ``max_connections ==
max_keepalive_connections`` (the default keeps 20 alive and opens a new connection per request
beyond that); the least-busy client takes each request."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

SHARD = 16


class HttpxBackend:
    def __init__(
        self,
        concurrency: int,
        transport: httpx.AsyncBaseTransport | None,
        headers: dict[str, str] | None,
    ) -> None:
        shards = max(1, math.ceil(concurrency / SHARD))
        per = math.ceil(concurrency / shards) or None  # None: httpx's "no limit"
        limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
        timeout = httpx.Timeout(connect=10.0, read=None, write=10.0, pool=None)
        self._clients = [
            httpx.AsyncClient(
                limits=limits,
                timeout=timeout,
                transport=transport,
                headers=headers,
                follow_redirects=False,
            )
            for _ in range(shards)
        ]
        self._busy = [0] * len(self._clients)

    @asynccontextmanager
    async def post(
        self, url: str, content: bytes, headers: Mapping[str, str], read_timeout: float,
        sent: Callable[[], None],
    ) -> AsyncIterator[httpx.Response]:  # fmt: skip
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
        finally:
            self._busy[i] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients = []
