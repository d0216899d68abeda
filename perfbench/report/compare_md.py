"""The compare verdict in Markdown: what CI prints and appends to the job summary (pure).
Tables follow GitHub-flavoured Markdown (a header row, a delimiter row, numbers
right-aligned)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perfbench.report.format import TITLES, change, quantity, spread, table
from perfbench.stats.compare import Comparison, Row
from perfbench.stats.gate import Outcome
from perfbench.stats.thresholds import ThresholdResult

MARKS = {
    "regression": "❌ regression",
    "improvement": "✅ improvement",
    "pass": "pass",
    "inconclusive": "⚠️ inconclusive",
    "n/a": "n/a",
}
# Rows shown for scopes that are not gated: enough to point at the case that moved, without
# the near-duplicates (with one task per case and run, P50 = P95 = P99 = mean).
INFO_METRICS = ("p50", "p95", "ttft_p50", "error_rate", "rate_429", "tokens_out", "cost")
HEADLINES: dict[Outcome, str] = {
    "pass": "✅ pass",
    "regression": "❌ regression",
    "threshold": "❌ threshold breached",
    "inconclusive": "⚠️ inconclusive",
}


def _p(row: Row) -> str:
    if row.exact:
        return "exact"
    if row.p is None:
        return "–"
    text = f"{row.p:.3f}"
    return f"{text} (q {row.q:.3f})" if row.q is not None else text


def _row_cells(row: Row, first: str) -> list[str]:
    note = " ¹" if row.outliers else ""
    return [
        first,
        spread(row.baseline, row.unit),
        spread(row.candidate, row.unit),
        change(row),
        _p(row),
        MARKS[row.verdict] + note,
    ]


def _name(meta: Mapping[str, Any]) -> str:
    label = meta.get("label")
    return f"`{label}` ({meta['id']})" if label else f"`{meta['id']}`"


def comparison(
    result: Comparison,
    base_meta: Mapping[str, Any],
    cand_meta: Mapping[str, Any],
    thresholds: Sequence[ThresholdResult],
    outcome: Outcome,
    notes: Sequence[str] = (),
) -> str:
    """The compare verdict as Markdown: what CI prints and appends to the job summary."""
    suite = cand_meta.get("suite", {})
    parts = [
        f"## perfbench compare: {_headline(outcome, result, (base_meta, cand_meta))}",
        "",
        f"Baseline {_name(base_meta)}, {result.runs[0]} runs → candidate {_name(cand_meta)}, "
        f"{result.runs[1]} runs; suite `{suite.get('name', '?')}` "
        f"(digest `{str(suite.get('digest', ''))[:12]}`).",
        "",
        _gating(result),
        "",
        table(
            ("Metric", "Baseline", "Candidate", "Change", "p", "Verdict"),
            (
                _row_cells(r, TITLES.get(r.metric, r.metric))
                for r in result.rows
                if r.scope == "overall" and r.verdict != "n/a"
            ),
            right=(1, 2, 3, 4),
        ),
    ]
    parts += _threshold_section(thresholds)
    parts += _scoped_section(result, "case", "Per case")
    parts += _scoped_section(result, "language", "Per language")
    if any(r.outliers for r in result.rows if r.verdict != "pass"):
        parts += ["", "¹ one run far from the others was left out of the test (median kept)."]
    warnings = [*result.warnings, *notes]
    if warnings:
        parts += ["", "### Warnings", "", *(f"- {w}" for w in warnings)]
    parts += [
        "",
        "Medians across runs, with the run-to-run range in brackets. p: one-sided exact "
        "Mann-Whitney test on the run-level values.",
    ]
    return "\n".join(parts) + "\n"


def _headline(
    outcome: Outcome, result: Comparison | None, metas: Sequence[Mapping[str, Any]]
) -> str:
    """The outcome; a pass that rests on too few runs or on a run that did not complete says
    so (it exits 0 unless --strict, but a green tick would hide it)."""
    doubts = []
    if result is not None and result.inconclusive:
        doubts.append("a change needs more runs to tell")
    if any(m.get("status") != "completed" for m in metas):
        doubts.append("a run did not complete")
    if outcome != "pass" or not doubts:
        return HEADLINES[outcome]
    return f"⚠️ inconclusive ({'; '.join(doubts)}); exit 0 without --strict"


def _gating(result: Comparison) -> str:
    scopes = ", ".join(
        {"case": "per case", "language": "per language"}.get(s, s) for s in result.scopes
    )
    text = f"Gated: {', '.join(result.gated)} ({scopes}); p < {result.alpha:g}"
    if result.correction == "none":
        return text + "; no multiple-test correction: the gated metrics are a declared set."
    return text + "; Benjamini-Hochberg correction over the gated rows (q values)."


def _threshold_section(thresholds: Sequence[ThresholdResult]) -> list[str]:
    if not thresholds:
        return []
    rows = (
        (
            f"`{t.threshold.text}`",
            quantity(t.value, t.threshold.unit),
            "pass" if t.ok else "❌ breached",
        )
        for t in thresholds
    )
    return [
        "",
        "### Thresholds (candidate, median across runs)",
        "",
        table(("Threshold", "Value", "Result"), rows, (1,)),
    ]


def _scoped_section(result: Comparison, scope: str, title: str) -> list[str]:
    rows = [r for r in result.rows if r.scope == scope and r.verdict != "n/a"]
    if not rows:
        return []
    gated = any(r.gated for r in rows)
    flagged = [
        r
        for r in rows
        if r.verdict in ("regression", "inconclusive", "improvement")
        and (r.gated or r.metric in INFO_METRICS)
    ]
    heading = f"### {title}" + ("" if gated else " (informational, not gated)")
    header = (scope.capitalize(), "Metric", "Baseline", "Candidate", "Change", "p", "Verdict")
    body = [[f"`{r.key}`", *_row_cells(r, TITLES.get(r.metric, r.metric))] for r in flagged]
    out = ["", heading, ""]
    if body:
        out.append(table(header, body, right=(2, 3, 4, 5)))
    else:
        out.append("No metric moved beyond its threshold.")
    latency = [r for r in rows if r.metric == "p95"]
    if latency:
        details = table(
            (scope.capitalize(), "Baseline P95", "Candidate P95", "Change", "Verdict"),
            (
                [f"`{r.key}`", spread(r.baseline, r.unit), spread(r.candidate, r.unit),
                 change(r), MARKS[r.verdict]]
                for r in latency
            ),
            right=(1, 2, 3),
        )  # fmt: skip
        out += [
            "",
            f"<details><summary>P95 of every {scope}</summary>",
            "",
            details,
            "",
            "</details>",
        ]
    return out


def thresholds_only(
    meta: Mapping[str, Any],
    thresholds: Sequence[ThresholdResult],
    outcome: Outcome,
    notes: Sequence[str] = (),
) -> str:
    """The verdict of ``perfbench compare RUN --threshold …`` (no baseline)."""
    parts = [
        f"## perfbench thresholds: {_headline(outcome, None, (meta,))}",
        "",
        f"Run {_name(meta)}.",
    ]
    parts += _threshold_section(thresholds)
    if notes:
        parts += ["", "### Warnings", "", *(f"- {n}" for n in notes)]
    return "\n".join(parts) + "\n"
