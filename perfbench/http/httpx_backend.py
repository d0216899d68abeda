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

from perfbench.http.limits import MAX_BODY, read_bounded, read_head

SHARD = 16


class HttpxResponse:
    """httpx's streamed response as a ``perfbench.http.Response``: reads bounded as
    http/limits.py says. Also wraps the responses of a caller's own httpx client."""

    __slots__ = ("_response",)

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status_code(self) -> int:
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    async def aread(self, limit: int = MAX_BODY) -> bytes:
        response = self._response
        return await read_bounded(
            response.aiter_bytes(), limit, lambda: response.num_bytes_downloaded
        )

    async def ahead(self, n: int) -> bytes:
        head, _ = await read_head(self._response.aiter_bytes(), n)
        return head

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return self._response.aiter_bytes()


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
    ) -> AsyncIterator[HttpxResponse]:  # fmt: skip
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
                yield HttpxResponse(response)
        finally:
            self._busy[i] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients = []
