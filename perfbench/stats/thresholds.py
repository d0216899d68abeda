"""The one grammar for a limit on a figure: ``p95<2s``, ``error_rate<1%``,
``p99{case=answer-en}<=800ms`` (k6's thresholds). ``compare --threshold`` checks any metric;
``sweep --slo`` takes a latency one. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfbench.errors import GateError
from perfbench.stats.compare import BY_NAME, Scope

_QUANTITY = re.compile(r"^\s*\$?\s*([-+]?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ms|s|%|us|µs)?\s*$")
_THRESHOLD = re.compile(
    r"^\s*(?P<metric>[a-z_][a-z0-9_.]*)\s*(?:\{\s*(?P<scope>case|language)\s*=\s*(?P<key>[^}]+?)\s*\})?"
    r"\s*(?P<op><=|>=|<|>)\s*(?P<value>.+)$",
    re.IGNORECASE,
)


def quantity(text: str | float, what: str) -> float:
    """``"15%"`` → 0.15, ``"2s"`` → 2.0, ``"500ms"`` → 0.5, ``"$0.01"`` → 0.01, ``3`` → 3.0."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    match = _QUANTITY.match(str(text))
    if not match:
        raise GateError(f"{what}: '{text}' is not a number (examples: 15%, 2s, 500ms, 0.01)")
    value = float(match.group(1))
    unit = (match.group(2) or "").lower()
    scale = {"%": 0.01, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}.get(unit, 1.0)
    return value * scale


@dataclass(frozen=True)
class Threshold:
    text: str
    metric: str  # a metric name (p95, error_rate…) or a dotted path into the run metrics
    op: str
    limit: float
    scope: Scope = "overall"
    key: str = ""

    @property
    def unit(self) -> str:
        if self.metric in BY_NAME:
            return BY_NAME[self.metric].unit
        if self.metric.split(".")[0] in ("latency", "latency_all", "ttft", "latency_intended"):
            return "s"
        return "rate" if self.metric.endswith("_rate") else ""


@dataclass(frozen=True)
class ThresholdResult:
    threshold: Threshold
    value: float | None  # median across the candidate's runs; None when it has no such figure
    ok: bool


def parse_threshold(text: str) -> Threshold:
    match = _THRESHOLD.match(text)
    if not match:
        raise GateError(
            f"threshold '{text}': write METRIC<VALUE, as in p95<2s, error_rate<1%, "
            "p99{case=answer-en}<=800ms"
        )
    metric = match.group("metric")
    if metric not in BY_NAME and "." not in metric and metric not in _SCALARS:
        raise GateError(
            f"threshold '{text}': unknown metric '{metric}'; known: {', '.join(BY_NAME)} "
            "or a dotted path such as latency.p99_9"
        )
    scope: Scope = match.group("scope").lower() if match.group("scope") else "overall"  # type: ignore[assignment]
    return Threshold(
        text=text.strip(),
        metric=metric,
        op=match.group("op"),
        limit=quantity(match.group("value"), f"threshold '{text}'"),
        scope=scope,
        key=match.group("key") or "",
    )


_SCALARS = {"tasks", "ok", "throttled", "retries", "late", "output_tokens_per_s", "expect_mismatch"}
_OPS = {
    "<": lambda v, lim: v < lim,
    "<=": lambda v, lim: v <= lim,
    ">": lambda v, lim: v > lim,
    ">=": lambda v, lim: v >= lim,
}


def check_thresholds(
    summary: Mapping[str, Any], thresholds: Sequence[Threshold]
) -> list[ThresholdResult]:
    """Each threshold against the median across the run's repetitions. A figure the run does
    not have (no successful task, so no P95) breaches the threshold: absence is not a pass."""
    across = summary["across_runs"]
    out = []
    for t in thresholds:
        path = BY_NAME[t.metric].path if t.metric in BY_NAME else t.metric
        if t.scope == "overall":
            scope = across["overall"]
        else:
            scopes = across[t.scope + "s"]
            if t.key not in scopes:  # a typo, not a breach: nothing of the run is measured
                raise GateError(
                    f"threshold '{t.text}': the run has no {t.scope} '{t.key}'; it has "
                    + ", ".join(f"'{k}'" for k in sorted(scopes))
                )
            scope = scopes[t.key]
        entry = scope.get(path)
        value = entry["median"] if entry else None
        out.append(ThresholdResult(t, value, value is not None and _OPS[t.op](value, t.limit)))
    return out


SLO_METRICS = ("p50", "p95", "p99", "mean")  # spec.PERCENTILE_SLOS


def parse_slo(text: str) -> tuple[str, float]:
    """A sweep's latency objective, ``p95<2s``: the metric and its limit in seconds."""
    found = parse_threshold(text)
    if found.metric not in SLO_METRICS or found.op not in ("<", "<=") or found.scope != "overall":
        raise GateError(
            f"--slo '{text}': a latency limit on {', '.join(SLO_METRICS)}, as in 'p95<2s' or "
            "'p99<800ms'"
        )
    return found.metric, found.limit
