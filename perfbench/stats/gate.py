"""The release gate: rules from settings and flags, absolute thresholds, and the outcome.

Pure. Two layers, as k6 and DESIGN §6 separate them:

* relative: :func:`perfbench.stats.compare.compare` judges the candidate against the baseline with
  :class:`~perfbench.stats.compare.Rules` built here from ``[compare]`` settings and
  ``--max-regression p95=15%`` style flags;
* absolute: thresholds such as ``p95<2s``, ``error_rate<1%`` or ``p95{case=answer-en}<800ms``
  are checked on the candidate alone (median across its runs).

The outcome orders what a CI job must hear first: a regression, then a threshold breach, then
an inconclusive comparison, then an underpowered one (a gated metric whose runs could not
have flagged the declared change: its pass would be blind). It is the verdict whatever the
flags (``--json`` prints it); only the exit code depends on ``--strict``, which alone turns
"inconclusive" and "underpowered" into a failure (exit 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from perfbench.errors import GateError
from perfbench.stats.compare import BY_NAME, Comparison, Row, Rules, Scope
from perfbench.stats.thresholds import ThresholdResult, quantity

Outcome = Literal["pass", "regression", "threshold", "inconclusive", "underpowered"]
# Outcomes that fail a job only under --strict: the runs did not show a problem, but could
# not have shown one either (inconclusive: a change too noisy to tell; underpowered: a gated
# metric that could not have failed at the declared change).
DOUBTS: tuple[Outcome, ...] = ("inconclusive", "underpowered")


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
    noise_k: float | None = None,
    detect: str | None = None,
) -> Rules:
    """Defaults, then the ``[compare]`` settings, then the command line (which wins)."""
    rules = Rules()
    for source, label in (
        (settings.get("max_regression", {}), "max_regression"),
        (max_regression, "--max-regression"),
    ):
        for name, value in _pairs(source, label):
            rules = rules.with_tolerance(_known(name, label), quantity(value, f"{label} {name}"))
    for source, label in ((settings.get("floor", {}), "floor"), (floors, "--floor")):
        for name, value in _pairs(source, label):
            rules = rules.with_floor(_known(name, label), quantity(value, f"{label} {name}"))
    gated = gate if gate is not None else settings.get("gate")
    if gated is not None:
        names = [n.strip() for g in gated for n in str(g).split(",") if n.strip()]
        rules = replace(rules, gate=tuple(_known(n, "gate") for n in names), gate_named=True)
    wanted = scopes if scopes is not None else settings.get("scopes")
    if wanted is not None:
        rules = replace(rules, scopes=_scopes(wanted))
    if "correction" in settings:
        correction = settings["correction"]
        if correction not in ("auto", "holm", "bh", "none"):
            raise GateError(f"correction: '{correction}' should be auto, holm, bh or none")
        rules = replace(rules, correction=correction)
    chosen = alpha if alpha is not None else settings.get("alpha")
    if chosen is not None:
        value = float(chosen)
        if not 0 < value < 1:
            raise GateError(f"alpha: {value} should be between 0 and 1, as in 0.05")
        rules = replace(rules, alpha=value)
    if noise_k is not None:
        if noise_k < 0:
            raise GateError(f"--noise-bar: {noise_k} should be 0 (off) or more, as in 2.5")
        rules = replace(rules, noise_k=noise_k)
    wanted_change = detect if detect is not None else settings.get("detect")
    if wanted_change is not None:
        value = quantity(wanted_change, "--detect")
        if not 0 < value < 10:
            raise GateError(f"--detect {wanted_change}: a relative change such as 10% or 25%")
        rules = replace(rules, detect=value)
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


def outcome(
    comparison: Comparison | None,
    thresholds: Sequence[ThresholdResult],
    complete: bool = True,
) -> Outcome:
    """The verdict. ``complete``: every run compared finished (an interrupted or killed one
    measured only part of what was planned, so its pass is inconclusive)."""
    if comparison is not None and comparison.regressions:
        return "regression"
    if any(not r.ok for r in thresholds):
        return "threshold"
    if not complete or (comparison is not None and comparison.inconclusive):
        return "inconclusive"
    if comparison is not None and comparison.underpowered:
        return "underpowered"
    return "pass"


def fails(verdict: Outcome, strict: bool) -> bool:
    """Whether the verdict fails the job: inconclusive and underpowered only when asked to
    be strict."""
    return verdict != "pass" and (strict or verdict not in DOUBTS)


def confirmed(first: Comparison, second: Comparison) -> list[Row]:
    """The regressions of ``first`` that ``second`` (both sides measured again) shows too: a
    regression is kept by ``compare --confirm`` only when the same metric, in the same scope,
    regressed twice; one seen once is a fluke until shown again."""
    again = {(r.scope, r.key, r.metric) for r in second.regressions}
    return [r for r in first.regressions if (r.scope, r.key, r.metric) in again]
