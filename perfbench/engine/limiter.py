"""The limiter: at most ``limit`` tasks past it at once, a limit that changes while tasks wait
(adaptive concurrency) and may be 0 (a worker process whose share of a coordinated AIMD limit
is nothing for now)."""

from __future__ import annotations

import anyio


class Limiter:
    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._changed = anyio.Event()

    async def acquire(self) -> None:
        while self.used >= self.limit:
            await self._changed.wait()
        self.used += 1

    def release(self) -> None:
        self.used -= 1
        self._wake()

    def set(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
