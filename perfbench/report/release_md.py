"""The release report in Markdown: every chart with the table of its numbers beside it (pure).
Chart links are relative, so a report folder can be moved or committed as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfbench.report.compare_md import comparison
from perfbench.report.format import quantity, spread, table
from perfbench.stats.advice import advise
from perfbench.stats.compare import Comparison, Spread
from perfbench.stats.gate import Outcome


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
                spread(_overall_median(v, "throttle_rate"), "per task"),
            ]
        )
    header = ("Run", "Tasks/s", "Output tokens/s", "Error rate", "429 answers per task")
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
