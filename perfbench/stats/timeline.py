"""Latency over time within a run directory: tasks by the moment they ended, in at most
``BUCKETS`` equal time slots from the session's start, warmup passes included (so a cold start
shows), each slot with its count of finished tasks and the P50 and P95 of its successful ones.

Pure and bounded: the slots start ``FIRST_WIDTH`` wide and double in width (merging pairs) each
time a task ends past the last one, so memory and the stored form are O(``BUCKETS``) whatever
the number of samples, and the slot edges are always ``FIRST_WIDTH`` × a power of two from 0.
That makes two timelines of the same session (worker processes share the parent's clock
origin) mergeable without loss: the finer one is coarsened to the other's width first.
"""

from __future__ import annotations

import math
from typing import Any

from perfbench.sample import Phase, Sample
from perfbench.stats.histogram import Histogram

BUCKETS = 64  # at most this many slots per phase; after a doubling, between 32 and 64
FIRST_WIDTH = 0.25  # seconds
_PHASE_ORDER: dict[str, int] = {"warmup": 0, "measured": 1}


class _Slot:
    __slots__ = ("latency", "tasks")

    def __init__(self) -> None:
        self.tasks = 0  # finished tasks, failed ones included
        self.latency = Histogram()  # successful tasks only, as the summary's ``latency``

    def merge(self, other: _Slot) -> None:
        self.tasks += other.tasks
        self.latency.merge(other.latency)


class Timeline:
    """Feed it samples (``add``); ``to_json`` is summary.json's ``timeline``."""

    __slots__ = ("_slots", "width")

    def __init__(self, width: float = FIRST_WIDTH) -> None:
        self.width = width
        # (slot index, phase): a slot where warmup ends and measuring begins holds both.
        self._slots: dict[tuple[int, Phase], _Slot] = {}

    def __bool__(self) -> bool:
        return bool(self._slots)

    def add(self, s: Sample) -> None:
        if s.status in ("cancelled", "dropped") or not math.isfinite(s.end):
            return  # not finished by the target: neither counted nor timed, as in the summary
        index = self._index(s.end)
        while index >= BUCKETS:
            self._coarsen()
            index = self._index(s.end)
        slot = self._slots.get((index, s.phase))
        if slot is None:
            slot = self._slots[(index, s.phase)] = _Slot()
        slot.tasks += 1
        if s.status == "ok":
            slot.latency.add(s.end - s.start)

    def _index(self, t: float) -> int:
        return max(0, int(t // self.width))

    def _coarsen(self) -> None:
        """Double the width: slots 2k and 2k + 1 become slot k."""
        self.width *= 2
        slots, self._slots = self._slots, {}
        for (index, phase), slot in sorted(slots.items(), key=_order):
            into = self._slots.get((index // 2, phase))
            if into is None:
                self._slots[(index // 2, phase)] = slot
            else:
                into.merge(slot)

    def merge(self, other: Timeline) -> None:
        """Add another process's timeline of the same session (it is consumed)."""
        while self.width < other.width:
            self._coarsen()
        while other.width < self.width:
            other._coarsen()
        for key, slot in sorted(other._slots.items(), key=_order):
            mine = self._slots.get(key)
            if mine is None:
                self._slots[key] = slot
            else:
                mine.merge(slot)

    def to_json(self) -> dict[str, Any]:
        """``bucket_s`` (the slot width) and the non-empty slots in time order, warmup first in
        a shared slot: ``t`` (slot start, seconds since the session's start), ``phase``,
        ``tasks`` (finished), ``ok``, and ``p50``/``p95`` of the ok tasks' latency (None
        without any)."""
        buckets = []
        for (index, phase), slot in sorted(self._slots.items(), key=_order):
            percentiles = slot.latency.percentiles((50.0, 95.0))
            buckets.append(
                {
                    "t": index * self.width,
                    "phase": phase,
                    "tasks": slot.tasks,
                    "ok": slot.latency.count,
                    "p50": percentiles.get(50.0),
                    "p95": percentiles.get(95.0),
                }
            )
        return {"bucket_s": self.width, "buckets": buckets}


def _order(item: tuple[tuple[int, Phase], _Slot]) -> tuple[int, int]:
    (index, phase), _ = item
    return index, _PHASE_ORDER[phase]
