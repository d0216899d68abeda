"""The release gate: rules from settings and flags, absolute thresholds, and the outcome.

Pure. Two layers, as k6 and DESIGN §6 separate them:

* relative: :func:`perfbench.stats.compare.compare` judges the candidate against the baseline with
  :class:`~perfbench.stats.compare.Rules` built here from ``[compare]`` settings and
  ``--max-regression p95=15%`` style flags;
* absolute: thresholds such as ``p95<2s``, ``error_rate<1%`` or ``p95{case=answer-en}<800ms``
  are checked on the candidate alone (median across its runs).

The outcome orders what a CI job must hear first: a regression, then a threshold breach, then
(only when strict) an inconclusive comparison.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from perfbench.errors import GateError
from perfbench.stats.compare import BY_NAME, Comparison, Rules, Scope

Outcome = Literal["pass", "regression", "threshold", "inconclusive"]
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


def _pairs(items: Iterable[str] | Mapping[str, Any], what: str) -> Iterable[tuple[str, Any]]:
    if isinstance(items, Mapping):
        yield from items.items()
        return
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise GateError(f"{what}: '{item}' should be NAME=VALUE, as in p95=15%")
        yield name.strip(), value.strip()


def _known(name: str, what: str) -> str:
    if name not in BY_NAME:
        raise GateError(f"{what}: unknown metric '{name}'; known: {', '.join(BY_NAME)}")
    return name


def build_rules(
    settings: Mapping[str, Any],
    max_regression: Sequence[str] = (),
    floors: Sequence[str] = (),
    gate: Sequence[str] | None = None,
    scopes: Sequence[str] | None = None,
    alpha: float | None = None,
) -> Rules:
    """Defaults, then the ``[compare]`` settings, then the command line (which wins)."""
    rules = Rules()
    for source, label in (
        (settings.get("max_regression", {}), "max_regression"),
        (max_regression, "--max-regression"),
    ):
        for name, value in _pairs(source, label):
            rules = rules.with_threshold(_known(name, label), quantity(value, f"{label} {name}"))
    for source, label in ((settings.get("floor", {}), "floor"), (floors, "--floor")):
        for name, value in _pairs(source, label):
            rules = rules.with_floor(_known(name, label), quantity(value, f"{label} {name}"))
    gated = gate if gate is not None else settings.get("gate")
    if gated is not None:
        names = [n.strip() for g in gated for n in str(g).split(",") if n.strip()]
        rules = replace(rules, gate=tuple(_known(n, "gate") for n in names))
    wanted = scopes if scopes is not None else settings.get("scopes")
    if wanted is not None:
        rules = replace(rules, scopes=_scopes(wanted))
    if "correction" in settings:
        correction = settings["correction"]
        if correction not in ("auto", "bh", "none"):
            raise GateError(f"correction: '{correction}' should be auto, bh or none")
        rules = replace(rules, correction=correction)
    chosen = alpha if alpha is not None else settings.get("alpha")
    if chosen is not None:
        value = float(chosen)
        if not 0 < value < 1:
            raise GateError(f"alpha: {value} should be between 0 and 1, as in 0.05")
        rules = replace(rules, alpha=value)
    return rules


def _scopes(wanted: Sequence[str]) -> tuple[Scope, ...]:
    names = [n.strip() for w in wanted for n in str(w).split(",") if n.strip()]
    if "all" in names:
        return ("overall", "case", "language")
    aliases: dict[str, Scope] = {
        "overall": "overall",
        "case": "case",
        "cases": "case",
        "language": "language",
        "languages": "language",
    }
    unknown = [n for n in names if n not in aliases]
    if unknown:
        raise GateError(f"scope '{unknown[0]}' is not one of overall, cases, languages, all")
    return tuple(dict.fromkeys(aliases[n] for n in names))


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


def outcome(
    comparison: Comparison | None,
    thresholds: Sequence[ThresholdResult],
    strict: bool,
    complete: bool = True,
) -> Outcome:
    """``complete``: every run compared finished (an interrupted or killed one measured only
    part of what was planned, so with ``strict`` its pass is inconclusive)."""
    if comparison is not None and comparison.regressions:
        return "regression"
    if any(not r.ok for r in thresholds):
        return "threshold"
    if strict and (not complete or (comparison is not None and comparison.inconclusive)):
        return "inconclusive"
    return "pass"
