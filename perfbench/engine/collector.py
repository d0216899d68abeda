"""The cyclic garbage collector's control during a run (why: see ``Collector``)."""

from __future__ import annotations

import gc


class Collector:
    """The cyclic garbage collector, off while a run measures and on again when it ends.

    With it on, the in-flight tasks' objects (coroutines, futures, responses) are scanned
    again and again: CPython counts a collection's due date in allocations less *any* frees,
    so the young generation grew to 10–27k objects, and collections took 2–7 ms mid-pass
    (one full one, 15 ms) while arriving tokens waited. Off, at 256 streams held 200 ms, TTFT
    error at P99 was lower in 12 of 15 paired runs on this noisy VM. An HTTP run's own tasks
    leave no cyclic garbage (62 objects after 1,024 tasks and after 8,192), the in-process
    mock's a little: what a pass leaves is collected when it ends, with nothing in flight, and
    within a pass when the young objects since the last collection pass ``VALVE`` (checked
    every 1,024 tasks): a rare pause, not a steady leak. Memory over 1,000,000 tasks: +18.3 MiB
    from the reading at 50,000, flat after 650,000 (`tests/bench/memory_1m.py`, 2026-12-02)."""

    CHECK_EVERY = 1024
    VALVE = 50_000  # young tracked objects (allocations less frees) since the last collection

    def __init__(self) -> None:
        self._was_on = False
        self._tasks = 0

    def pause(self) -> None:
        """Off for the run; ``restore`` turns it on again only if it was on now."""
        self._was_on = gc.isenabled()
        gc.disable()

    @staticmethod
    def pass_starting() -> None:
        """Freeze the heap as it is (modules, the suite, the target, open connections), so no
        collection scans it again while the pass measures: at 256 streams in flight a full
        collection of it took 55 ms mid-pass. No collection first (over a test process's heap
        it costs more than a short pass); ``restore`` unfreezes it at the end."""
        gc.freeze()

    def pass_ended(self) -> None:
        """Nothing is in flight: collect what the pass left, before the next pass freezes it
        (only what the pass made is scanned; older objects are frozen)."""
        gc.collect()

    def task_done(self) -> None:
        self._tasks += 1
        if not self._tasks % self.CHECK_EVERY and gc.get_count()[0] > self.VALVE:
            gc.collect()

    def restore(self) -> None:
        """As it was before the run; the heap frozen at each pass start is unfrozen."""
        gc.unfreeze()
        if self._was_on:
            gc.enable()
