"""One worker process's share of a run's load (``--workers N``): all the arithmetic that splits
a plan among processes, in one place. In a single process the share is the whole (0 of 1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Share:
    index: int = 0
    count: int = 1

    @property
    def whole(self) -> bool:
        return self.count == 1

    def split(self, total: int) -> int:
        """This worker's part of ``total`` (concurrency, max in flight, a limit): the first
        ``total % count`` workers take one more."""
        return total // self.count + (self.index < total % self.count)

    def owns(self, place: int, iteration: int, slots: int) -> bool:
        """Whether the task (case at ``place`` in the suite, ``iteration``) is this worker's,
        when the pass's tasks are dealt over ``slots`` global slots and worker k owns the
        slots s ≡ k (mod count). Dealt by case + iteration, so a worker's cases change round
        by round: dealt by the task's place in the pass, 16 cases over 2 workers would give
        one worker the same 8 cases in every round, and the other the rest."""
        return ((place + iteration) % slots) % self.count == self.index

    def slot_offsets(self, slots: int, step: float) -> list[float]:
        """When this worker's ``slots`` closed-loop slots start after the pass's start: slot i
        is global slot i·count + index, so the workers' starts interleave and together start
        one slot every ``step`` seconds."""
        return [(i * self.count + self.index) * step for i in range(slots)]
