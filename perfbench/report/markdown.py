"""Markdown for people and for GitHub: the comparison verdict and the release report.

Pure: plain data in, text out. Tables follow GitHub-flavoured Markdown (a header row, a
delimiter row, numbers right-aligned); chart links are relative so a report folder can be moved
or committed as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfbench.stats.advice import advise
from perfbench.stats.compare import Comparison, Row, Spread
from perfbench.stats.gate import Outcome, ThresholdResult

TITLES = {
    "p50": "P50 latency",
    "p95": "P95 latency",
    "p99": "P99 latency",
    "mean": "mean latency",
    "ttft_p50": "TTFT P50",
    "ttft_p95": "TTFT P95",
    "throughput": "throughput",
    "error_rate": "error rate",
    "rate_429": "429 rate",
    "tokens_in": "tokens in / task",
    "tokens_out": "tokens out / task",
    "cost": "cost / task",
}
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


def quantity(value: float | None, unit: str) -> str:
    """A figure in its unit for a table cell; ``–`` when there is none."""
    if value is None:
        return "–"
    if unit == "s":
        if abs(value) < 0.01:
            return f"{value * 1e3:.2f} ms"
        return f"{value * 1e3:.1f} ms" if abs(value) < 1 else f"{value:.3f} s"
    if unit == "rate":
        return f"{100 * value:.2f}%"
    if unit == "tasks/s":
        return f"{value:,.2f}/s"
    if unit == "USD":
        return f"${value:.6f}"
    return f"{value:,.1f}"


def spread(s: Spread | None, unit: str) -> str:
    """Median with the run-to-run range, the way every comparison cell reads."""
    if s is None:
        return "–"
    if s.n == 1 or s.min == s.max:
        return quantity(s.median, unit)
    return f"{quantity(s.median, unit)} ({quantity(s.min, unit)}–{quantity(s.max, unit)})"


def change(row: Row) -> str:
    if row.baseline is None or row.candidate is None:
        return "–"
    if row.unit == "rate":  # rates near zero: a change in points, not a ratio
        return f"{100 * (row.candidate.median - row.baseline.median):+.2f} pts"
    if row.change is None:
        return "new" if row.candidate.median else "0"
    return f"{100 * row.change:+.1f}%"


def _p(row: Row) -> str:
    if row.exact:
        return "exact"
    if row.p is None:
        return "–"
    text = f"{row.p:.3f}"
    return f"{text} (q {row.q:.3f})" if row.q is not None else text


def table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[int] = ()) -> str:
    """A GitHub table; ``right`` lists the columns to right-align. Pipes in cells are escaped."""
    aligned = set(right)
    delims = ["---:" if i in aligned else "---" for i in range(len(header))]
    lines = [_line(header), _line(delims)]
    lines += [_line([c.replace("|", "\\|") for c in r]) for r in rows]
    return "\n".join(lines)


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


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


@dataclass(frozen=True)
class RunView:
    """What the report shows of one run: its name (label or id), meta and summary."""

    name: str
    meta: Mapping[str, Any]
    summary: Mapping[str, Any]


def report(
    runs: Sequence[RunView],
    baseline: str | None,
    figures: Mapping[str, str],
    comparisons: Sequence[tuple[str, RunView, Comparison]],
    sweeps: Sequence[tuple[str, str]] = (),
) -> str:
    """The release report: every chart with the table of its numbers beside it."""
    parts = ["# perfbench report", "", _runs_table(runs, baseline)]
    parts += _relative(runs, baseline)
    parts += _figure(figures, "latency", "Latency distribution (tasks, all runs pooled)")
    parts += [_percentile_table(runs)]
    parts += _figure(figures, "cases", "P95 latency per case (median across runs, min–max)")
    parts += [_case_table(runs)]
    parts += _figure(figures, "throughput", "Throughput and errors")
    parts += [_throughput_table(runs)]
    parts += _figure(figures, "cost", "Tokens and cost per language")
    if "cost" not in figures:
        parts += ["No chart: no run has prices for its model (see `--prices`).", ""]
    parts += [_language_table(runs)]
    if "adaptive" in figures:
        parts += _figure(figures, "adaptive", "Adaptive concurrency limit over time")
        parts += [_adaptive_table(runs)]
    for chart, text in sweeps:
        body = text.replace("\n# ", "\n### ").removeprefix("# ")
        parts += ["", "## Sweep", ""]
        parts += [f"![sweep]({chart})", ""] if chart else []
        parts += ["### " + body.replace("\n## ", "\n#### ")]
    for name, view, result in comparisons:
        base_view = next(r for r in runs if r.name == baseline)
        text = comparison(result, base_view.meta, view.meta, [], _outcome_of(result))
        parts += ["", text.replace("## perfbench compare:", f"## {name} vs {baseline}:", 1)]
    parts += _report_warnings(runs)
    return "\n".join(parts).rstrip() + "\n"


def _outcome_of(result: Comparison) -> Outcome:
    return "regression" if result.regressions else "pass"


def _figure(figures: Mapping[str, str], key: str, title: str) -> list[str]:
    parts = ["", f"## {title}", ""]
    if key in figures:
        stem = figures[key].removesuffix(".png")
        parts += [f"![{title}]({figures[key]})", "", f"[SVG]({stem}.svg)", ""]
    return parts


def _overall_median(view: RunView, path: str) -> Spread | None:
    return _spread_of(view.summary["across_runs"]["overall"].get(path))


def _runs_table(runs: Sequence[RunView], baseline: str | None) -> str:
    rows = []
    for v in runs:
        overall = [r["overall"] for r in v.summary["runs"]]
        ok, tasks = sum(o["ok"] for o in overall), sum(o["tasks"] for o in overall)
        role = " (baseline)" if v.name == baseline else ""
        rows.append(
            [
                f"**{v.name}**{role}",
                f"`{v.meta.get('target', '?')}`",
                str(v.meta.get("started_at", "?"))[:19].replace("T", " "),
                str(len(v.summary["runs"])),
                f"{ok}/{tasks}",
                str(v.meta.get("status", "?")),
                f"`{v.meta['suite'].get('name', '?')}` `{str(v.meta['suite'].get('digest'))[:8]}`",
            ]
        )
    header = ("Run", "Target", "Started (UTC)", "Runs", "ok/tasks", "Status", "Suite")
    return table(header, rows, right=(3, 4))


def _relative(runs: Sequence[RunView], baseline: str | None) -> list[str]:
    """hyperfine's summary: each run's mean task latency relative to the reference (the
    baseline, else the fastest), with the range over its runs."""
    means = {v.name: _overall_median(v, "latency.mean") for v in runs}
    known = {k: s for k, s in means.items() if s is not None}
    if not known:
        return []
    ref = baseline if baseline in known else min(known, key=lambda k: known[k].median)
    ref_median = known[ref].median
    rows = []
    for name, s in means.items():
        if s is None:
            rows.append([name, "–", "–"])
            continue
        rel = f"{s.median / ref_median:.2f} ({s.min / ref_median:.2f}–{s.max / ref_median:.2f})"
        rows.append([f"**{name}**" if name == ref else name, spread(s, "s"), rel])
    what = "the baseline" if ref == baseline else "the fastest"
    return [
        "",
        f"## Relative mean latency (1.00 = {what}; range over runs)",
        "",
        table(("Run", "Mean latency", "Relative"), rows, right=(1, 2)),
    ]


def _percentile_table(runs: Sequence[RunView]) -> str:
    keys = ("p50", "p90", "p95", "p99", "p99_9", "max")
    rows = []
    for v in runs:
        dist = v.summary["pooled"]["overall"].get("latency") or {}
        rows.append([v.name, str(dist.get("n", 0)), *(quantity(dist.get(k), "s") for k in keys)])
    header = ("Run", "n", "P50", "P90", "P95", "P99", "P99.9", "max")
    return table(header, rows, right=range(1, 8))


def _case_table(runs: Sequence[RunView]) -> str:
    cases = sorted({c for v in runs for c in v.summary["across_runs"]["cases"]})
    rows = []
    for case in cases:
        cells = [f"`{case}`"]
        for v in runs:
            for path in ("latency.p50", "latency.p95"):
                entry = v.summary["across_runs"]["cases"].get(case, {}).get(path)
                cells.append(spread(_spread_of(entry), "s"))
        rows.append(cells)
    header = ["Case", *(f"{v.name} {p}" for v in runs for p in ("P50", "P95"))]
    return table(header, rows, right=range(1, len(header)))


def _spread_of(entry: Mapping[str, Any] | None) -> Spread | None:
    if not entry:
        return None
    return Spread(entry["median"], entry["min"], entry["max"], entry["n"], ())


def _throughput_table(runs: Sequence[RunView]) -> str:
    rows = []
    for v in runs:
        rows.append(
            [
                v.name,
                spread(_overall_median(v, "throughput"), "tasks/s"),
                spread(_overall_median(v, "output_tokens_per_s"), "tokens"),
                spread(_overall_median(v, "error_rate"), "rate"),
                spread(_overall_median(v, "throttle_rate"), "rate"),
            ]
        )
    header = ("Run", "Tasks/s", "Output tokens/s", "Error rate", "429 rate")
    return table(header, rows, right=(1, 2, 3, 4))


def _language_table(runs: Sequence[RunView]) -> str:
    """Per language and run (model): the same prompt on different tokenizers side by side."""
    rows = []
    for v in runs:
        prices = v.meta.get("prices") or {}
        priced = str(prices.get("priced_as") or "unpriced")
        if prices.get("simulated"):
            priced += " (simulated)"
        for lang, m in v.summary["pooled"].get("languages", {}).items():
            estimated = " (est.)" if m.get("tokens_estimated") else ""
            rows.append(
                [
                    v.name,
                    priced,
                    f"`{lang}`",
                    str(m["tasks"]),
                    quantity(m.get("input_chars"), ""),
                    quantity(m.get("tokens_in"), "") + estimated,
                    quantity(m.get("tokens_out"), "") + estimated,
                    quantity(m.get("tokens_per_100_chars"), ""),
                    _usd(m.get("cost_per_task"), m.get("unpriced")),
                    _usd(m.get("cost_per_1k_chars"), m.get("unpriced")),
                    quantity((m.get("latency") or {}).get("p50"), "s"),
                    quantity((m.get("latency") or {}).get("p95"), "s"),
                ]
            )
    header = (
        "Run", "Priced as", "Language", "Tasks", "Chars in", "Tokens in", "Tokens out",
        "Tokens/100 chars", "Cost/task", "Cost/1k chars", "P50", "P95",
    )  # fmt: skip
    return table(header, rows, right=range(3, 12))


def _usd(value: float | None, unpriced: int | None) -> str:
    if value is None:
        return "unpriced" if unpriced else "–"
    return quantity(value, "USD")


def _adaptive_table(runs: Sequence[RunView]) -> str:
    rows = []
    for v in runs:
        adaptive = v.summary.get("adaptive")
        if not adaptive:
            continue
        history = adaptive.get("history") or []
        peak = max((limit for _, limit in history), default=None)
        converged = adaptive.get("converged_limit")
        rows.append([v.name, str(len(history)), quantity(peak, ""), quantity(converged, "")])
    return table(("Run", "Limit changes", "Highest limit", "Converged limit"), rows, (1, 2, 3))


def _report_warnings(runs: Sequence[RunView]) -> list[str]:
    notes = [f"**{v.name}**: {note}" for v in runs for note in advise(v.summary, v.meta)]
    if not notes:
        return []
    return ["", "## Warnings", "", *(f"- {n}" for n in notes)]
