"""The client monitor: how busy perfbench itself was while it measured.

A load tester that is itself the bottleneck reports its own delays as the target's latency,
the first complaint about every LLM benchmark client. While a run works, a watcher task asks
to wake every ``interval`` seconds and records how late it woke (event-loop lag: time the
loop spent on other work before it could run a ready task, which every measured task also
waits), and the process's CPU time over the run's wall time is taken at the end. Both go
into summary.json (``client``) and, past their limits, into warnings.
"""

from __future__ import annotations

import time
from typing import Any

from perfbench.clock import Clock, sleep_until
from perfbench.stats.histogram import Histogram

INTERVAL_S = 0.02


class ClientMonitor:
    def __init__(self, clock: Clock, interval: float = INTERVAL_S) -> None:
        self.clock, self.interval = clock, interval
        self.lag = Histogram()
        # Off during warmup (it absorbs one-time costs: imports, a tokenizer's tables) and
        # between passes (a pass's statistics are computed when it ends, with nothing in
        # flight): both would otherwise show as lag no measured task waited behind.
        self.recording = True
        self._epoch = 0  # bumped by pause/resume: a wait spanning one is not counted
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()

    def pause(self) -> None:
        self.recording = False
        self._epoch += 1

    def resume(self) -> None:
        self.recording = True
        self._epoch += 1

    async def watch(self) -> None:
        """Runs until cancelled. Deadlines are absolute, so one late wake-up is counted once
        and does not shift the ones after it."""
        due = self.clock() + self.interval
        while True:
            epoch = self._epoch
            await sleep_until(self.clock, due)
            now = self.clock()
            if self.recording and epoch == self._epoch:
                self.lag.add(max(0.0, now - due))
            due = max(due + self.interval, now)

    def summary(self) -> dict[str, Any]:
        wall = time.monotonic() - self._wall0
        cpu = time.process_time() - self._cpu0
        return {
            "loop_lag": self.lag.summary(),
            "cpu_s": cpu,
            "wall_s": wall,
            # Share of one core; above ~0.9 the client, not the target, sets the pace.
            "cpu_share": cpu / wall if wall > 0 else None,
        }
