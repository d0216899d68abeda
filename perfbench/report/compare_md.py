"""The compare verdict in Markdown: what CI prints and appends to the job summary (pure).
Tables follow GitHub-flavoured Markdown (a header row, a delimiter row, numbers
right-aligned)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perfbench.report import slo
from perfbench.report.format import (
    THIN,
    THIN_NOTE,
    TITLES,
    change,
    md_code,
    p_value,
    quantity,
    spread,
    table,
    thin,
)
from perfbench.stats.advice import ITL_CAVEAT
from perfbench.stats.compare import Comparison, Row, tested_count
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
    "underpowered": "⚠️ underpowered",
}


GAPS_NOTE = (
    "perfbench's event loop lagged (see the warnings), so streamed chunks that arrived apart "
    "were read together and their gaps count as 0; rerun on a quieter machine, or with "
    "--workers, to measure ITL."
)


def _title(row: Row, result: Comparison) -> str:
    title = TITLES.get(row.metric, row.metric)
    return f"{title} ²" if result.gaps_merged and row.metric.startswith("itl") else title


def _row_cells(row: Row, first: str) -> list[str]:
    note = " ¹" if row.outliers else ""
    return [
        first,
        spread(row.baseline, row.unit, _thin(row)),
        spread(row.candidate, row.unit, _thin(row)),
        change(row),
        _bar(row),
        p_value(row),
        _mark(row) + note,
    ]


def _thin(row: Row) -> str:
    """THIN when the row is a percentile some run had too few tasks for (4 tasks a run: its
    P95 and P99 rows were both each run's slowest task, side by side and unmarked)."""
    key = row.metric.rsplit("_", 1)[-1]  # p95, ttft_p99, itl_p50
    return THIN if row.tasks is not None and thin(row.tasks, key) else ""


def _thin_note(*texts: str) -> list[str]:
    return ["", THIN_NOTE] if any(THIN in text for text in texts) else []


def _mark(row: Row) -> str:
    """The row's verdict; a pass that could not have been a failure says so."""
    if row.underpowered and row.verdict == "pass":
        return "⚠️ underpowered"
    return MARKS[row.verdict]


def _bar(row: Row) -> str:
    """The change that counts; marked ``noise`` when the runs' spread set it, not the
    threshold (a bar set by noise says: these runs cannot see smaller changes)."""
    if row.bar is None or row.unit == "rate":
        return "–"
    text = f"±{100 * row.bar:.1f}%" + (" noise" if row.by_noise else "")
    if row.wide_bar is not None and row.wide_bar > row.bar and row.verdict != "regression":
        text += f" (±{100 * row.wide_bar:.1f}% with ¹)"  # an outlier run widens the doubt
    return text


def _name(meta: Mapping[str, Any]) -> str:
    label = meta.get("label")
    return f"{md_code(label)} ({meta['id']})" if label else md_code(meta["id"])


def comparison(
    result: Comparison,
    base_meta: Mapping[str, Any],
    cand_meta: Mapping[str, Any],
    thresholds: Sequence[ThresholdResult],
    outcome: Outcome,
    notes: Sequence[str] = (),
    strict: bool = False,
) -> str:
    """The compare verdict as Markdown: what CI prints and appends to the job summary."""
    suite = cand_meta.get("suite", {})
    overall = table(
        ("Metric", "Baseline", "Candidate", "Change", "Counts beyond", "p", "Verdict"),
        (
            _row_cells(r, _title(r, result))
            for r in result.rows
            if r.scope == "overall" and r.verdict != "n/a"
        ),
        right=(1, 2, 3, 4, 5),
    )
    parts = [
        f"## perfbench compare: {_headline(outcome, result, (base_meta, cand_meta), strict)}",
        "",
        f"Baseline {_name(base_meta)}, {result.runs[0]} runs → candidate {_name(cand_meta)}, "
        f"{result.runs[1]} runs; suite {md_code(suite.get('name', '?'))} "
        f"(digest `{str(suite.get('digest', ''))[:12]}`).",
        "",
        _gating(result),
        "",
        overall,
        *_thin_note(overall),
    ]
    parts += slo.compare_tails(result)  # each side's early-stopping P95/P99 beside the rows
    parts += _moved(result)
    parts += _detectable(result)
    parts += _power_section(result)
    parts += _threshold_section(thresholds)
    parts += _scoped_section(result, "case", "Per case")
    parts += _scoped_section(result, "language", "Per language")
    if any(r.outliers for r in result.rows if r.verdict != "pass"):
        parts += ["", "¹ one run far from the others was left out of the test (median kept)."]
    if result.gaps_merged:
        parts += ["", f"² {ITL_CAVEAT}: {GAPS_NOTE}"]
    warnings = [*result.warnings, *notes]
    if warnings:
        parts += ["", "### Warnings", "", *(f"- {w}" for w in warnings)]
    parts += [
        "",
        "Medians across runs, with the run-to-run range in brackets. Counts beyond: the "
        "change a metric must exceed, its threshold or (noise) the runs' run-to-run CV times "
        "the noise bar (--noise-bar); with an outlier run, a change must also clear its "
        "spread to be inconclusive. " + _test_note(result),
    ]
    return "\n".join(parts) + "\n"


def _test_note(result: Comparison) -> str:
    if any(r.paired for r in result.rows):
        return (
            "Runs paired in order (run i of each side measured together): the change is the "
            "median per-pair ratio, the noise the pairs' own; p: one-sided exact Wilcoxon "
            "signed-rank test on the per-pair log-ratios."
        )
    return "p: one-sided exact Mann-Whitney test on the run-level values."


def _moved(result: Comparison) -> list[str]:
    """For a latency that changed, which part of a task's time moved (model, tool, the
    agent's own, client wait)."""
    rows = [r for r in result.rows if r.scope == "overall" and r.metric in _LATENCIES]
    changed = [r for r in rows if r.verdict in ("regression", "inconclusive", "improvement")]
    if result.moved is None or not changed:
        return []
    row = changed[0]
    return ["", f"Where it moved: {TITLES.get(row.metric, row.metric)} {change(row)}; "
            f"{result.moved}."]  # fmt: skip


_LATENCIES = ("p50", "p95", "p99", "mean")


def _headline(
    outcome: Outcome,
    result: Comparison | None,
    metas: Sequence[Mapping[str, Any]],
    strict: bool = False,
) -> str:
    """The outcome, and for an inconclusive one why and what it exits with (0 unless
    --strict: a green tick would hide it, a red cross would overstate it)."""
    if outcome == "underpowered" and result is not None:
        code = "exit 6 (--strict)" if strict else "exit 0 without --strict"
        names = ", ".join(TITLES.get(r.metric, r.metric) for r in _blind(result))
        return f"⚠️ underpowered ({names} could not have failed); {code}"
    doubts = []
    if result is not None and result.inconclusive:
        doubts.append("a change needs more runs to tell")
    if any(m.get("status") != "completed" for m in metas):
        doubts.append("a run did not complete")
    if outcome not in ("pass", "inconclusive") or not doubts:
        return HEADLINES[outcome]
    code = "exit 6 (--strict)" if strict else "exit 0 without --strict"
    return f"⚠️ inconclusive ({'; '.join(doubts)}); {code}"


def _gating(result: Comparison) -> str:
    scopes = ", ".join(
        {"case": "per case", "language": "per language"}.get(s, s) for s in result.scopes
    )
    text = f"Gated: {', '.join(result.gated)} ({scopes}); p < {result.alpha:g}"
    tested = tested_count(result)
    if result.correction == "holm":
        return text + (
            f" after Holm's correction over the {tested} tested metrics (q values): the chance "
            f"that the same code is flagged on any of them stays at {result.alpha:g}."
        )
    if result.correction == "benjamini-hochberg":
        return text + (
            f" after Benjamini-Hochberg's correction over the {tested} tested rows (q values): "
            f"the false discovery rate, which for the same code on both sides is the chance "
            f"that any row is flagged, stays at {result.alpha:g}."
        )
    return text + '; no multiple-test correction (--config correction = "none").'


def _detectable(result: Comparison) -> list[str]:
    """What these runs can see: below these changes a regression passes as noise."""
    rows = [r for r in result.rows if r.scope == "overall" and r.detectable is not None]
    if not rows:
        return []
    listed = ", ".join(
        f"{TITLES.get(r.metric, r.metric)} ±{100 * (r.detectable or 0):.0f}%" for r in rows
    )
    n, m = result.runs
    sides = f"{n} runs a side" if n == m else f"{n} and {m} runs"
    return [
        "",
        f"With {sides} at this noise, the smallest changes this comparison detects (4 times "
        f"in 5) are: {listed}. `perfbench plan RUN --detect 10%` says how many runs and "
        "repeats a smaller one needs.",
    ]


def _blind(result: Comparison) -> list[Row]:
    return [r for r in result.underpowered if r.scope == "overall"] or result.underpowered


def _power_section(result: Comparison) -> list[str]:
    """Each gated metric that could not have failed, and what would let it."""
    blind = _blind(result)
    if not blind:
        return []
    n = min(result.runs)
    lines = ["", "### Underpowered: these metrics could not have failed", ""]
    for row in blind:
        where = f" (`{row.key}`)" if row.key else ""
        lines.append(
            f"- {TITLES.get(row.metric, row.metric)}{where}: a {100 * (row.detect or 0):g}% "
            f"change would be flagged less than 4 times in 5 with {n} runs a side at this "
            f"noise ({_noise(row)}); {_remedy(row)}."
        )
    lines += [
        "",
        "A pass here says nothing about them. Measure more (the runs and repeats above), "
        "declare a larger change with `--detect 25%`, or leave them out of `--gate`.",
    ]
    return lines


def _noise(row: Row) -> str:
    return "noise unknown" if row.noise is None else f"run-to-run CV {100 * row.noise:.1f}%"


def _remedy(row: Row) -> str:
    if row.needs is None:
        return row.power_note or "no plan found"
    runs, factor = row.needs
    repeat = f" and {factor} times the --repeat" if factor > 1 else ""
    return f"{runs} runs a side{repeat} would catch it"


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
    header = (scope.capitalize(), "Metric", "Baseline", "Candidate", "Change", "Counts beyond",
              "p", "Verdict")  # fmt: skip
    body = [[md_code(r.key), *_row_cells(r, TITLES.get(r.metric, r.metric))] for r in flagged]
    out = ["", heading, ""]
    if body:
        flagged_table = table(header, body, right=(2, 3, 4, 5, 6))
        out += [flagged_table, *_thin_note(flagged_table)]
    else:
        out.append("No metric moved beyond its threshold.")
    latency = [r for r in rows if r.metric == "p95"]
    if latency:
        details = table(
            (scope.capitalize(), "Baseline P95", "Candidate P95", "Change", "Verdict"),
            (
                [md_code(r.key), spread(r.baseline, r.unit, _thin(r)),
                 spread(r.candidate, r.unit, _thin(r)), change(r), MARKS[r.verdict]]
                for r in latency
            ),
            right=(1, 2, 3),
        )  # fmt: skip
        out += [
            "",
            f"<details><summary>P95 of every {scope}</summary>",
            "",
            details,
            *_thin_note(details),
            "",
            "</details>",
        ]
    return out


def thresholds_only(
    meta: Mapping[str, Any],
    thresholds: Sequence[ThresholdResult],
    outcome: Outcome,
    notes: Sequence[str] = (),
    strict: bool = False,
) -> str:
    """The verdict of ``perfbench compare RUN --threshold …`` (no baseline)."""
    parts = [
        f"## perfbench thresholds: {_headline(outcome, None, (meta,), strict)}",
        "",
        f"Run {_name(meta)}.",
    ]
    parts += _threshold_section(thresholds)
    if notes:
        parts += ["", "### Warnings", "", *(f"- {n}" for n in notes)]
    return "\n".join(parts) + "\n"
