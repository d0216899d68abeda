"""Model calls counted per model: what ``perfbench proxy`` saw, as a run's timing table has
it (calls, failures, TTFT and end-to-end percentiles, tokens).

Pure: steps in, plain dicts out. A proxy session may see a million calls, so each model keeps
histograms (bounded, ``stats/histogram``) and sums, never the steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfbench.sample import Step
from perfbench.stats.histogram import Histogram

PERCENTILES = (50.0, 95.0, 99.0)


@dataclass
class _Model:
    calls: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    ttft: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)

    def add(self, step: Step) -> None:
        self.calls += 1
        if step.status != "ok":
            self.failed += 1
            return  # a failure's timing is not the model's; it is counted above
        self.e2e.add(step.duration)
        if step.ttft is not None:
            self.ttft.add(step.ttft)
        self.tokens_in += step.tokens_in or 0
        self.tokens_out += step.tokens_out or 0

    def to_dict(self) -> dict[str, Any]:
        ok = self.calls - self.failed
        return {
            "calls": self.calls,
            "failed": self.failed,
            "ttft": _percentiles(self.ttft),
            "e2e": _percentiles(self.e2e),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_out_per_call": self.tokens_out / ok if ok else None,
        }


@dataclass
class CallFigures:
    """Per model (the model the request asked for), and over all models."""

    models: dict[str, _Model] = field(default_factory=dict)

    def add(self, step: Step, model: str) -> None:
        self.models.setdefault(model or "?", _Model()).add(step)

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.models.values())

    @property
    def failed(self) -> int:
        return sum(m.failed for m in self.models.values())

    def to_dict(self) -> dict[str, Any]:
        return {name: m.to_dict() for name, m in sorted(self.models.items())}


def call_doc(step: Step, model: str) -> dict[str, Any]:
    """One call as a JSON line (``perfbench proxy --json``)."""
    return {
        "event": "call",
        "model": model,
        "api": step.name,
        "status": step.status,
        "http_status": step.http_status,
        "ttft": step.ttft,
        "e2e": step.duration,
        "tokens_in": step.tokens_in,
        "tokens_out": step.tokens_out,
        "finish": step.finish,
    }


def _percentiles(h: Histogram) -> dict[str, float] | None:
    if h.count == 0:
        return None
    values = h.percentiles(PERCENTILES)
    return {f"p{p:g}": values[p] for p in PERCENTILES}
