"""HTTP clients sized for the planned load (DESIGN §7).

httpx's default pool caps a client at 100 connections and keeps only 20 alive, so past 20 in
flight it opens a new connection per request, and its pool bookkeeping grows with the queue.
So: one client per ``SHARD`` in-flight requests, each with ``max_connections ==
max_keepalive_connections``, and each request goes to the least-busy client. No pool timeout:
the runner's task deadline bounds the wait, and the wait is timed on the step."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

SHARD = 16


class Pool:
    def __init__(
        self,
        concurrency: int,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        shards = max(1, math.ceil(concurrency / SHARD))
        per = max(1, math.ceil(concurrency / shards))
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
        self._busy = [0] * shards

    @asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        i = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[i] += 1
        try:
            yield self._clients[i]
        finally:
            self._busy[i] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
