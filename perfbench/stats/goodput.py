"""Goodput: the share (and rate) of requests and tasks that met every service-level objective
of ``run --slo "ttft<500ms,tpot<50ms"``, as DistServe and vLLM's bench define it. Pure.

A *request* is one model call of a task (a task of 3 model calls is 3 requests). Its figures:

* ``ttft``: from its request going out to its first token (streamed replies only);
* ``tpot``: time per output token after the first, ``(e2e − ttft) / (tokens_out − 1)``;
* ``e2e``: from its request going out to its last byte.

A task also has ``latency``, from its start to its end. A request that failed or was refused,
or whose figure an objective needs is unknown (no TTFT without streaming, no TPOT with fewer
than 2 output tokens), misses; a task meets the objectives when it succeeded, every one of its
requests met the request objectives and its latency met ``latency``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfbench.errors import GateError
from perfbench.sample import Sample, Step
from perfbench.stats.thresholds import quantity

REQUEST_METRICS = ("ttft", "tpot", "e2e")
TASK_METRICS = ("latency",)
_TERM = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|<)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Slo:
    """Upper limits in seconds by metric name; ``text`` as given (recorded, shown)."""

    text: str
    limits: tuple[tuple[str, float], ...]

    def request_meets(self, step: Step) -> bool:
        figures = request_figures(step)
        return step.status == "ok" and all(
            (value := figures.get(name)) is not None and value <= limit
            for name, limit in self.limits
            if name in REQUEST_METRICS
        )

    def task_meets(self, sample: Sample) -> bool:
        if sample.status != "ok":
            return False
        for name, limit in self.limits:
            if name == "latency" and sample.end - sample.start > limit:
                return False
        return all(self.request_meets(st) for st in sample.steps if st.kind == "model")


def parse(text: str) -> Slo:
    """``"ttft<500ms,tpot<50ms"`` → an Slo; a clear GateError naming the term otherwise."""
    limits = []
    for term in (t for t in text.split(",") if t.strip()):
        match = _TERM.match(term)
        if not match:
            raise GateError(f"--slo: '{term.strip()}' is not METRIC<LIMIT (e.g. ttft<500ms)")
        name, _, value = match.groups()
        if name not in (*REQUEST_METRICS, *TASK_METRICS):
            known = ", ".join((*REQUEST_METRICS, *TASK_METRICS))
            hint = ""
            if re.fullmatch(r"p\d+|mean", name):  # a percentile: a gate's or a sweep's limit
                hint = (
                    f" ('{name}<…' limits a percentile: `sweep --slo` takes it, and `compare "
                    f"--threshold '{name}<2s'` gates a run on it)"
                )
            raise GateError(f"--slo: '{name}' is not one of {known}{hint}")
        limit = quantity(value, f"--slo {name}")
        if limit <= 0:
            raise GateError(f"--slo {name}: the limit must be above 0, not {value}")
        limits.append((name, limit))
    if not limits:
        raise GateError("--slo: give objectives, e.g. 'ttft<500ms,tpot<50ms'")
    return Slo(text.strip(), tuple(limits))


def request_figures(step: Step) -> dict[str, float | None]:
    """A model call's ttft, tpot and e2e (None where its reply cannot show one)."""
    e2e = step.duration - (step.wait or 0.0)
    tpot = None
    if step.ttft is not None and step.tokens_out is not None and step.tokens_out >= 2:
        tpot = max(0.0, e2e - step.ttft) / (step.tokens_out - 1)
    return {"ttft": step.ttft, "tpot": tpot, "e2e": e2e}
