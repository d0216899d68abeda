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

A preset (``--slo mlperf:llama2-70b:interactive``, stats/presets.py) adds a percentile: each of
its objectives is met when that percentile of the metric, over the run's requests (tasks for
``latency``), is at or under its limit, as MLPerf judges a run; goodput is counted as well.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfbench.errors import GateError
from perfbench.sample import Sample, Step
from perfbench.stats import early_stopping, presets
from perfbench.stats.histogram import Histogram
from perfbench.stats.thresholds import quantity

REQUEST_METRICS = ("ttft", "tpot", "e2e")
TASK_METRICS = ("latency",)
_TERM = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|<)\s*(.+?)\s*$")
_UNIT = re.compile(r"(ms|s|us|µs)$", re.IGNORECASE)


@dataclass(frozen=True)
class Slo:
    """Upper limits in seconds by metric name; ``text`` as given (recorded, shown). A preset's
    also has the percentile its limits hold at, and its name."""

    text: str
    limits: tuple[tuple[str, float], ...]
    percentile: float | None = None
    preset: presets.Preset | None = None

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
    """``"ttft<500ms,tpot<50ms"`` or a preset's name → an Slo; a clear GateError naming the
    term otherwise."""
    if presets.is_preset_name(text):
        found = presets.find(text)
        return Slo(found.name, found.limits, found.percentile, found)
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
        if not _UNIT.search(value.strip()):  # 'ttft<500': 500 s or 500 ms? Never guess
            raise GateError(
                f"--slo '{term.strip()}': give the limit a unit, as in {name}<{value}ms or "
                f"{name}<{value}s (accepted: ms, s, us)"
            )
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


def percentile_checks(slo: Slo, figures: Mapping[str, Histogram]) -> list[dict[str, Any]]:
    """A preset's objectives, each judged on its percentile of the metric's distribution in
    ``figures`` (ttft and tpot over requests, latency over tasks), with MLPerf's
    early-stopping estimate of that percentile beside it (stats/early_stopping.py)."""
    assert slo.percentile is not None
    out = []
    for name, limit in slo.limits:
        hist = figures.get(name)
        n = hist.count if hist is not None else 0
        value = hist.percentiles([slo.percentile])[slo.percentile] if hist and n else None
        out.append(
            {
                "metric": name,
                "percentile": slo.percentile,
                "limit": limit,
                "n": n,
                "value": value,
                "early_stopping": early_stopping.estimate(hist, slo.percentile),
                "met": value is not None and value <= limit,
            }
        )
    return out
