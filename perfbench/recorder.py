"""The recorder: where every finished Sample goes. It appends the sample to samples.jsonl (when
there is a run directory), feeds the statistics, and tells any observer. O(1) per sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from perfbench.sample import Phase, Sample
from perfbench.stats import Summarizer

Observer = Callable[[Sample], None]


class Writer(Protocol):
    """Where samples are appended: samples.jsonl (store.SampleWriter), or a worker's link."""

    def write(self, sample: Sample) -> None: ...
    def close(self) -> None: ...


Price = Callable[[int | None, int | None], float | None]  # tokens in, out → USD or None


class Recorder:
    def __init__(
        self,
        summarizer: Summarizer,
        writer: Writer | None = None,
        observers: list[Observer] | None = None,
        price: Price | None = None,
    ) -> None:
        self.price = price
        self.summarizer = summarizer
        self.writer = writer
        self.observers = observers or []
        self.recorded = 0

    def record(self, sample: Sample) -> None:
        if self.price is not None and sample.cost is None:
            sample.cost = self.price(sample.tokens_in, sample.tokens_out)
        if self.writer is not None:
            self.writer.write(sample)
        self.summarizer.add(sample)
        self.recorded += 1
        for observe in self.observers:
            observe(sample)

    def pass_finished(self, phase: Phase, run: int) -> None:
        if phase == "measured":
            self.summarizer.close_run(run)
