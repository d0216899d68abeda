"""The recorder: where every finished Sample goes. It appends the sample to samples.jsonl (when
there is a run directory), feeds the statistics, and tells any observer. O(1) per sample."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from perfbench.sample import Phase, Sample
from perfbench.stats.summary import RunScopes, Summarizer

Observer = Callable[[Sample], None]


class Writer(Protocol):
    """Where samples are appended: samples.jsonl (store.SampleWriter), or a worker's link."""

    def write(self, sample: Sample) -> None: ...
    def write_lines(self, lines: bytes) -> None: ...
    def close(self) -> None: ...


Price = Callable[[Sample], float | None]  # a sample's tokens → USD, or None (unpriced)


class Recorder:
    def __init__(
        self,
        summarizer: Summarizer,
        writer: Writer | None = None,
        observers: Sequence[Observer] = (),
        price: Price | None = None,
    ) -> None:
        self.price = price
        self.summarizer = summarizer
        self.writer = writer
        self.observers = tuple(observers)
        self.recorded = 0

    def record(self, sample: Sample) -> None:
        if self.price is not None and sample.cost is None:
            sample.cost = self.price(sample)
        if self.writer is not None:
            self.writer.write(sample)
        self.summarizer.add(sample)
        self.recorded += 1
        for observe in self.observers:
            observe(sample)

    @property
    def watched(self) -> bool:
        """Whether anyone observes samples one by one (the live view, --json)."""
        return bool(self.observers)

    def record_lines(self, lines: bytes, count: int) -> None:
        """Samples recorded elsewhere (a worker process), already encoded as JSON lines and
        already in that process's statistics: appended to samples.jsonl only."""
        if self.writer is not None:
            self.writer.write_lines(lines)
        self.recorded += count

    def observe(self, sample: Sample) -> None:
        """Tell the observers of a sample recorded elsewhere (see ``record_lines``)."""
        for observe in self.observers:
            observe(sample)

    def absorb(self, run: int, scopes: RunScopes) -> None:
        """Another process's statistics for a measured run, merged before the run closes."""
        self.summarizer.absorb(run, scopes)

    def add_warmup(self, count: int) -> None:
        """Warmup tasks another process ran (counted, never in the statistics)."""
        self.summarizer.warmup_tasks += count

    def pass_finished(self, phase: Phase, run: int) -> None:
        if phase == "measured":
            self.summarizer.close_run(run)
