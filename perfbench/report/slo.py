"""A preset's verdict in words (``--slo mlperf:…``): met or missed, and per objective the
raw percentile beside its early-stopping estimate, for the console and the report. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfbench.report.format import TITLES, seconds, table
from perfbench.stats import early_stopping
from perfbench.stats.compare import Comparison

NAMES = {"ttft": "TTFT", "tpot": "TPOT", "latency": "latency"}
UNITS = {"ttft": "requests", "tpot": "requests", "latency": "tasks"}


def verdict(good: Mapping[str, Any]) -> list[str]:
    """``SLO mlperf:…: MISSED (TTFT P99 612 ms over 450 ms)`` then one line per objective;
    nothing when the objectives were not a preset's."""
    checks = good.get("objectives")
    if not checks:
        return []
    missed = [c for c in checks if not c["met"]]
    head = f"SLO {good['slo']}: " + (
        "MISSED (" + "; ".join(_why(c) for c in missed) + ")" if missed else "met"
    )
    return [head, *(_objective(c) for c in checks)]


def _why(check: Mapping[str, Any]) -> str:
    name = f"{NAMES[check['metric']]} P{check['percentile']:g}"
    if check["value"] is None:
        return f"{name}: no {UNITS[check['metric']]} measured it"
    return f"{name} {seconds(check['value'])} over {seconds(check['limit'])}"


def _objective(check: Mapping[str, Any]) -> str:
    """``  TTFT P99 612 ms (limit 450 ms, MISSED) · early-stopping P99 (99% confidence):
    640 ms``, or what an estimate needs."""
    pct = f"P{check['percentile']:g}"
    name = f"{NAMES[check['metric']]} {pct}"
    mark = "ok" if check["met"] else "MISSED"
    es = check["early_stopping"]
    found = early_stopping.Claim(
        check["percentile"], check["n"], check["value"], es["value"], es["needs"],
        es.get("claimable"), es.get("claimable_value"),
    )  # fmt: skip
    words = claim_words(found, UNITS[check["metric"]], raw=False)
    claim = f"early-stopping {pct} ({es['confidence']:.0%} confidence): {words}"
    return f"  {name} {seconds(check['value'])} (limit {seconds(check['limit'])}, {mark}) · {claim}"


# The tail figures a verdict rests on, as summary.json names them, and what one value is.
TAIL_FIGURES = (("latency", "latency", "tasks"), ("request_ttft", "TTFT", "requests"),
                ("tpot", "TPOT", "requests"))  # fmt: skip


def tail_claims(scope: Mapping[str, Any], percentile: float = 99.0) -> list[str]:
    """One line: each tail figure's early-stopping P99 beside its raw P99, or how many values
    that estimate needs; nothing for a summary written before estimates were kept."""
    parts = []
    for name, label, unit in TAIL_FIGURES:
        found = early_stopping.claim(scope, name, percentile)
        if found is not None:
            parts.append(f"{label} {claim_words(found, unit)}")
    if not parts:
        return []
    conf = f"{early_stopping.CONFIDENCE:.0%}"
    return [
        f"early-stopping P{percentile:g} ({conf} confidence, runs pooled): " + " · ".join(parts)
    ]


def claim_words(claim: early_stopping.Claim, unit: str, raw: bool = True) -> str:
    """``1.10 s (raw 1.02 s)``; without an estimate ``none: needs 662 tasks, has 100 (raw
    301.1 ms; they back only P93.5 ≤ 328.8 ms, the largest)``. ``raw``: with the raw
    percentile (not where the line gives it already)."""
    said = [f"raw {seconds(claim.raw)}"] if raw else []
    if claim.value is not None:
        return seconds(claim.value) + "".join(f" ({s})" for s in said)
    if claim.backs is not None and claim.largest is not None:
        said.append(f"they back only P{claim.backs:g} ≤ {seconds(claim.largest)}, the largest")
    notes = f" ({'; '.join(said)})" if said else ""
    return f"none: needs {claim.needs:,} {unit}, has {claim.n:,}{notes}"


TAILS_NOTE = (
    "Early-stopping (MLPerf Inference's rule): with {conf} confidence the true percentile is "
    "at most this value, given how many tasks measured it (each side's runs pooled); too few "
    "tasks back only a lower percentile, which their largest value bounds. The verdicts "
    "compare each run's raw percentile."
)


def compare_tails(result: Comparison) -> list[str]:
    """Beside compare's tail rows (P95, P99, TTFT P95…): each side's early-stopping estimate,
    as a table with a one-line note; nothing when neither summary kept estimates."""
    shown = {r.metric for r in result.rows if r.scope == "overall" and r.verdict != "n/a"}
    rows = [t for t in result.tails if t.metric in shown]
    if not rows:
        return []
    conf = f"{early_stopping.CONFIDENCE:.0%}"
    cells = (
        [TITLES.get(t.metric, t.metric), *(_side(c) for c in (t.baseline, t.candidate))]
        for t in rows
    )
    header = (f"Early-stopping ({conf})", "Baseline", "Candidate")
    return ["", table(header, cells), "", TAILS_NOTE.format(conf=conf)]


def _side(claim: early_stopping.Claim | None) -> str:
    return "–" if claim is None else claim_words(claim, "tasks")


def stamp_lines(stamp: Mapping[str, Any] | None) -> list[str]:
    """``scenario mlperf-server: INVALID``, then each failed rule with what it measured."""
    if not stamp:
        return []
    failed = [r for r in stamp["rules"] if not r["ok"]]
    head = f"scenario {stamp['name']}: {stamp_word(stamp)}"
    return [head, *(f"  {r['rule']}: {r['detail']}" for r in failed)]


def stamp_word(stamp: Mapping[str, Any] | None) -> str | None:
    """``VALID``/``INVALID`` (None without a scenario), for a comparison's heading."""
    if not stamp:
        return None
    return "VALID" if stamp["valid"] else "INVALID"
