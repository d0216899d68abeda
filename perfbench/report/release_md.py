"""The release report in Markdown (pure): the verdict first, then every chart with the table of
its numbers beside it. The tables come before their charts, and the verdict block has no image,
so the page reads where images do not load (a PR comment, a CI job summary). Chart links are
relative, so a report folder can be moved or committed as it is."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfbench.report import slo, time_split
from perfbench.report.compare_md import HEADLINES, MARKS, comparison
from perfbench.report.format import (
    THIN,
    THIN_NOTE,
    TITLES,
    change,
    md_code,
    md_text,
    number,
    p_value,
    quantity,
    spread,
    table,
    thin,
)
from perfbench.report.listed import left_out, listed
from perfbench.stats.advice import ITL_CAVEAT, advise, gaps_merged
from perfbench.stats.compare import Comparison, Row, Spread
from perfbench.stats.gate import Outcome

# The overall rows the verdict always shows, moved or not, so a pass shows its evidence.
HEADLINE_METRICS = ("p50", "p95", "throughput")
MOVED = ("regression", "inconclusive", "improvement")


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
    """The release report: the verdict, then every chart with the table of its numbers."""
    # Run names are labels users gave: escaped once here, they read as text everywhere below.
    runs = [replace(v, name=md_text(v.name)) for v in runs]
    baseline = md_text(baseline) if baseline is not None else None
    comparisons = [
        (md_text(name), replace(v, name=md_text(v.name)), c) for name, v, c in comparisons
    ]
    parts = ["# perfbench report", ""]
    parts += verdict(baseline, comparisons, runs)
    parts += ["", "## Runs", "", _runs_table(runs, baseline)]
    parts += _relative(runs, baseline)
    parts += _stamps(runs)
    for index, (name, _, result) in enumerate(comparisons):
        parts += _changes(figures, index, f"{name} against {baseline}", result.alpha)
    parts += _section("Latency distribution (tasks, all runs pooled)", _percentile_table(runs))
    parts += _tail_claims(runs)
    parts += _chart(figures, "latency", "task latency by percentile, per run", CAPTIONS["latency"])
    parts += _distribution(figures, runs, "ttft", "Time to first token (tasks, all runs pooled)")
    parts += _distribution(
        figures, runs, "itl_pooled", "Inter-token latency (every gap, all runs pooled)"
    )
    parts += _distribution(
        figures, runs, "itl", "Inter-token latency (each task's mean gap, all runs pooled)"
    )
    if "timeline" in figures:
        parts += _section("Latency over time (warmup included)", _timeline_table(runs))
        parts += _chart(figures, "timeline", "latency over time", CAPTIONS["timeline"])
    parts += _section("P95 latency per case (median across runs, min–max)", _case_table(runs))
    parts += _chart(figures, "cases", "P95 latency per case, per run", CAPTIONS["cases"])
    views = [(r.name, r.summary) for r in runs]
    parts += time_split.section(views, figures.get("time_split"))  # report/time_split.py
    parts += _section("Throughput and errors", _throughput_table(runs))
    what = "throughput (and error and 429 rates when any run had some), per run"
    parts += _chart(figures, "throughput", what, CAPTIONS["throughput"])
    parts += _chart(figures, "tokens", "output tokens per second, per run", CAPTIONS["tokens"])
    serving = _serving_table(runs)
    if serving:
        parts += _section("Requests: TPOT and goodput (each model call a request)", serving)
    parts += _server(runs, figures)
    parts += _section("Tokens and cost per language", _language_table(runs))
    parts += _chart(figures, "cost", "cost per task by language, per run", CAPTIONS["cost"])
    if "cost" not in figures:
        parts += ["No chart: no run has a non-zero price for its model (see `--prices`).", ""]
    if "adaptive" in figures:
        parts += _section("Adaptive concurrency limit over time", _adaptive_table(runs))
        parts += _chart(figures, "adaptive", "the adaptive concurrency limit over time")
    for chart, text in sweeps:
        body = text.replace("\n# ", "\n### ").removeprefix("# ")
        parts += ["", "## Sweep", "", "### " + body.replace("\n## ", "\n#### ")]
        parts += ["", f"![Chart: the sweep curve of the table above]({chart})", ""] if chart else []
    for name, view, result in comparisons:
        base_view = next(r for r in runs if r.name == baseline)
        text = comparison(result, base_view.meta, view.meta, [], _outcome_of(result))
        parts += [
            "",
            text.rstrip().replace("## perfbench compare:", f"## {name} vs {baseline}:", 1),
        ]
    parts += _report_warnings(runs)
    return "\n".join(parts).rstrip() + "\n"


def _tail_claims(runs: Sequence[RunView]) -> list[str]:
    """Each run's early-stopping P99s beside the raw ones (MLPerf's rule, runs pooled)."""
    lines = []
    for run in runs:
        said = slo.tail_claims(run.summary["pooled"]["overall"])
        if said:
            lines.append(f"- `{run.name}`: {said[0]}")
    return [*lines, ""] if lines else []


def _stamps(runs: Sequence[RunView]) -> list[str]:
    """Each run stamped by its --scenario: VALID, or INVALID with the rules it failed."""
    lines = []
    for run in runs:
        said = slo.stamp_lines(run.summary.get("scenario"))
        if said:
            lines += [f"- `{run.name}`: {said[0]}", *(f"  -{line[1:]}" for line in said[1:])]
    return ["", *lines] if lines else []


def verdict(
    baseline: str | None,
    comparisons: Sequence[tuple[str, RunView, Comparison]],
    runs: Sequence[RunView] = (),
) -> list[str]:
    """The block a reader needs first, paste-ready (no image, no relative link): per candidate,
    what regressed, by how much and at what p, and what the comparison can detect."""
    if baseline is None:
        return ["No baseline (`--baseline RUN`): the runs are shown side by side, not judged."]
    parts: list[str] = []
    for name, _, result in comparisons:
        parts += _verdict_of(name, baseline, result)
    incomplete = [v.name for v in runs if v.meta.get("status", "completed") != "completed"]
    if incomplete:
        parts += ["", f"⚠️ Did not complete: {', '.join(incomplete)} (see Runs)."]
    return parts


def _verdict_of(name: str, baseline: str, result: Comparison) -> list[str]:
    overall = [r for r in result.rows if r.scope == "overall" and r.verdict != "n/a"]
    shown = [r for r in overall if (r.gated and r.verdict in MOVED) or r.metric in HEADLINE_METRICS]
    header = ("Metric", baseline, name, "Change", "Counts beyond", "Detects", "p", "Verdict")
    parts = [
        f"## Verdict: {_mark(result)} — {name} against {baseline}",
        "",
        _moved_sentence(result),
        "",
        table(header, [_verdict_cells(r) for r in shown], right=(1, 2, 3, 4, 5, 6)),
        "",
        _detects(result),
    ]
    parts += _cases_sentence(result)
    if result.warnings:
        parts += ["", *(f"- ⚠️ {w}" for w in result.warnings)]
    return parts


def _mark(result: Comparison) -> str:
    return HEADLINES["pass"] if result.verdict == "pass" else MARKS[result.verdict]


def _verdict_cells(row: Row) -> list[str]:
    return [
        TITLES.get(row.metric, row.metric),
        spread(row.baseline, row.unit),
        spread(row.candidate, row.unit),
        change(row),
        _share(row.bar) + (" (noise)" if row.by_noise else ""),
        _share(row.detectable),
        p_value(row),
        MARKS[row.verdict] if row.gated else f"{MARKS[row.verdict]} (not gated)",
    ]


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _moved_sentence(result: Comparison) -> str:
    groups = (
        ("Regressed", result.regressions),
        ("Needs more runs to tell", result.inconclusive),
        ("Improved", result.improvements),
    )
    said = []
    for title, rows in groups:
        overall = [r for r in rows if r.scope == "overall"]  # cases have a sentence of their own
        if overall:
            said.append(f"**{title}:** " + ", ".join(_moved(r) for r in overall) + ".")
    return " ".join(said) or "No gated metric moved beyond what counts (its threshold or noise)."


def _moved(row: Row) -> str:
    p = "exact" if row.exact else f"p {row.p:.3f}" if row.p is not None else "no test"
    q = f", q {row.q:.3f}" if row.q is not None else ""
    return f"{TITLES.get(row.metric, row.metric)} {change(row)} ({p}{q})"


def _detects(result: Comparison) -> str:
    """What the comparison can tell, in its own figures (the statistics stay in stats)."""
    base, cand = result.runs
    corrected = result.correction != "none"
    q = f", q: p corrected over the gated rows ({result.correction})" if corrected else ""
    return (
        f"{base} baseline and {cand} candidate runs. p: one-sided exact Mann-Whitney on the "
        f"run-level values{q}; significant below {result.alpha:g}. Counts beyond: the change a "
        "metric must exceed (its threshold, or the runs' own noise). Detects: the smallest "
        "change these runs catch 4 times in 5; a smaller regression passes unseen."
    )


def _cases_sentence(result: Comparison) -> list[str]:
    """Which cases moved most, so a regression points at where to look (informational unless
    cases are gated)."""
    cases = [r for r in result.rows if r.scope == "case" and r.metric == "p95" and r.p is not None]
    worse = sorted((r for r in cases if r.verdict == "regression"), key=lambda r: -(r.change or 0))
    if not worse:
        return []
    top = ", ".join(f"{md_code(r.key)} {change(r)}" for r in worse[:3])
    return ["", f"P95 regressed in {len(worse)} of {len(cases)} cases; most: {top}."]


def _outcome_of(result: Comparison) -> Outcome:
    return "regression" if result.regressions else "pass"


def _section(title: str, numbers: str) -> list[str]:
    return ["", f"## {title}", "", numbers, ""]


def _chart(
    figures: Mapping[str, str],
    key: str,
    what: str,
    caption: str = "",
    numbers: str = "the table above",
) -> list[str]:
    """The chart after its table, with a sentence on how to read it; the alt text says where
    its numbers are, which is what a reader sees where the relative image does not load."""
    if key not in figures:
        return []
    stem = figures[key].removesuffix(".png")
    image = f"![Chart: {what} (numbers in {numbers})]({figures[key]})"
    return [*([caption, ""] if caption else []), image, "", f"[SVG]({stem}.svg)"]


# One sentence per chart: what it shows and how to read it.
CAPTIONS = {
    "latency": "Each line is a run's task latency at a percentile; further right is rarer, so "
    "a line that lifts only at the right is a tail problem, one that lifts everywhere a "
    "general slowdown.",
    "ttft": "Time from each task's first model request to its first token, by percentile: "
    "what a user waits before anything streams; a gap between lines at the left is a slower "
    "start for most tasks.",
    "itl_pooled": "Every gap between token chunks of every streamed task, pooled (a long "
    "answer weighs as many times as it has gaps), by percentile: vLLM bench's ITL; the right "
    "of the line is the stalls a reader of the stream sees.",
    "itl": "Each streamed task's mean gap between token chunks, by percentile: how fast the "
    "answer streams once it has started (higher means slower streaming).",
    "timeline": "P95 (solid) and P50 (dashed) latency of the tasks that ended in each time "
    "slot, with the tasks finished per second below; the shaded start is warmup, so a cold "
    "start shows as a peak there and a drift within the measured runs as a slope after it.",
    "server": "the server's own gauges (from its metrics page, read during the run) under the "
    "client's latency and tasks finished per second, on one time axis from the run's start: "
    "a latency rise over a growing queue (waiting requests) or a full KV cache is the server "
    "saturating; one with an idle server points at the client or the network. Red crosses "
    "are scrapes that failed.",
    "cases": "One bar per run for each case (median P95 across its runs, whiskers min–max): "
    "the longest bars and the cases where one run's bar outgrows the others' are where to "
    "look.",
    "throughput": "Successful tasks per second per run (median across its runs, whiskers "
    "min–max), beside its errors and 429 answers when any run had some; taller is better for "
    "throughput, worse for the rates.",
    "tokens": "Output tokens per second per run (median across its runs, whiskers min–max): "
    "the generation rate the target sustained; taller is better.",
    "cost": "Cost per task for each language, one bar per run; a language's bar tells what "
    "its tokenizer costs for the same prompt.",
}


def server_key(index: int) -> str:
    """The figure name of the server-metrics chart of the ``index``-th run of the report."""
    return f"server-{index + 1}"


def _server(runs: Sequence[RunView], figures: Mapping[str, str]) -> list[str]:
    """The scraped series' table, then each run's chart of them under its client timeline."""
    scraped = _server_table(runs)
    charted = [(k, v) for k, v in enumerate(runs) if server_key(k) in figures]
    if not scraped and not charted:
        return []
    numbers = scraped or "No summary of the scrapes: the charts are from server_metrics.jsonl."
    parts = _section("Server metrics (the server's own, read during each run)", numbers)
    for n, (k, v) in enumerate(charted):
        caption = f"**{v.name}**" + (f": {CAPTIONS['server']}" if n == 0 else "")
        what = f"the server's metrics under the client's timeline, {v.name}"
        parts += ["", *_chart(figures, server_key(k), what, caption)]
    return parts


def changes_key(index: int) -> str:
    """The figure name of the change chart of the ``index``-th comparison."""
    return "changes" if index == 0 else f"changes-{index + 1}"


def _changes(figures: Mapping[str, str], index: int, sides: str, alpha: float) -> list[str]:
    """A candidate's forest of changes: right after the runs, so what moved is seen first."""
    key = changes_key(index)
    if key not in figures:
        return []
    caption = (
        f"Each metric's change of the median (the dot) with its {100 * (1 - 2 * alpha):g}% "
        "interval (the line: the Hodges-Lehmann interval of the shift between run-level "
        "values, which goes with the test the gate runs) on a grey band of the change that "
        "counts (its threshold or the runs' noise); red regressed, green improved, hollow grey "
        "needs more runs to tell, dark grey did not move beyond what counts. Error and 429 "
        "rates are in points, in a panel of their own when any run had some."
    )
    numbers = "the verdict table and the comparison below"
    what = f"change per metric, {sides}"
    return ["", f"## Change per metric: {sides}", "", *_chart(figures, key, what, caption, numbers)]


def _distribution(
    figures: Mapping[str, str], runs: Sequence[RunView], kind: str, title: str
) -> list[str]:
    if kind not in figures:
        return []
    what = f"{TITLES_BY_KIND[kind]} by percentile, per run"
    if kind.startswith("itl") and any(gaps_merged(v.summary) for v in runs):
        title += f" ({ITL_CAVEAT} in {_lagged(runs)})"
    table_text = _percentile_table(runs, kind)
    return [*_section(title, table_text), *_chart(figures, kind, what, CAPTIONS[kind])]


def _lagged(runs: Sequence[RunView]) -> str:
    return ", ".join(v.name for v in runs if gaps_merged(v.summary))


TITLES_BY_KIND = {
    "latency": "task latency",
    "ttft": "time to first token",
    "itl_pooled": "ITL over every gap",
    "itl": "ITL (each task's mean gap)",
}


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
                md_code(v.meta.get("target", "?")),
                str(v.meta.get("started_at", "?"))[:19].replace("T", " "),
                str(len(v.summary["runs"])),
                f"{ok}/{tasks}",
                str(v.meta.get("status", "?")),
                f"{md_code(v.meta['suite'].get('name', '?'))} "
                f"{md_code(str(v.meta['suite'].get('digest'))[:8])}",
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


def _percentile_table(runs: Sequence[RunView], kind: str = "latency") -> str:
    keys = ("p50", "p90", "p95", "p99", "p99_9", "max")
    rows = []
    for v in runs:
        dist = v.summary["pooled"]["overall"].get(kind) or {}
        rows.append([v.name, str(dist.get("n", 0)), *(quantity(dist.get(k), "s") for k in keys)])
    header = ("Run", "n", "P50", "P90", "P95", "P99", "P99.9", "max")
    return table(header, rows, right=range(1, 8))


def _case_table(runs: Sequence[RunView]) -> str:
    across = [v.summary["across_runs"] for v in runs]
    cases = listed(across)
    rows = []
    for case in cases:
        cells = [md_code(case)]
        for v in runs:
            figures = v.summary["across_runs"]["cases"].get(case, {})
            tasks = (figures.get("tasks") or {}).get("min")  # a run's, the fewest
            for key in ("p50", "p95"):
                shown = spread(_spread_of(figures.get(f"latency.{key}")), "s")
                cells.append(shown + (THIN if thin(tasks, key) else ""))
        rows.append(cells)
    header = ["Case", *(f"{v.name} {p}" for v in runs for p in ("P50", "P95"))]
    text = table(header, rows, right=range(1, len(header)))
    more = left_out(across, cases)
    text += f"\n\n{more}" if more else ""
    return text + (f"\n\n{THIN_NOTE}" if any(THIN in c for r in rows for c in r[1:]) else "")


def _timeline_table(runs: Sequence[RunView]) -> str:
    """Per run, the slots' P95 in warmup and in the measured runs, and the slowest slot."""
    rows = []
    for v in runs:
        timeline = v.summary.get("timeline") or {}
        buckets = [b for b in timeline.get("buckets", []) if b.get("p95") is not None]
        if not buckets:
            continue
        warm = [b["p95"] for b in buckets if b["phase"] == "warmup"]
        measured = [b["p95"] for b in buckets if b["phase"] != "warmup"]
        worst = max(buckets, key=lambda b: b["p95"])
        rows.append(
            [
                v.name,
                quantity(timeline.get("bucket_s"), "s"),
                str(len(buckets)),
                quantity(statistics.median(warm), "s") if warm else "–",
                quantity(statistics.median(measured), "s") if measured else "–",
                f"{quantity(worst['p95'], 's')} at {worst['t']:g} s ({worst['phase']})",
            ]
        )
    header = (
        "Run",
        "Slot",
        "Slots",
        "Warmup P95 (slot median)",
        "Measured P95 (slot median)",
        "Slowest slot P95",
    )
    return table(header, rows, right=(1, 2, 3, 4))


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


def _serving_table(runs: Sequence[RunView]) -> str | None:
    """Request-level figures per run (docs/metrics.md), when any run has them: summaries made
    before requests were counted have none, and get no table."""
    if not any(_overall_median(v, "tpot.p50") or _overall_median(v, "requests") for v in runs):
        return None
    rows = []
    for v in runs:
        good = [r["overall"].get("goodput") for r in v.summary["runs"]]
        slo = next((g["slo"] for g in good if g), None)
        rows.append(
            [
                v.name,
                spread(_overall_median(v, "request_rate"), "tasks/s"),
                spread(_overall_median(v, "request_error_rate"), "rate"),
                spread(_overall_median(v, "tpot.p50"), "s"),
                spread(_overall_median(v, "tpot.p99"), "s"),
                spread(_overall_median(v, "goodput.request_share"), "rate"),
                spread(_overall_median(v, "goodput.task_share"), "rate"),
                md_code(slo) if slo else "–",
            ]
        )
    header = ("Run", "Requests/s", "Failed", "TPOT P50", "TPOT P99", "Goodput (requests)",
              "Goodput (tasks)", "--slo")  # fmt: skip
    return table(header, rows, right=(1, 2, 3, 4, 5, 6))


def _server_table(runs: Sequence[RunView]) -> str | None:
    """Each run's --server-metrics, its first series (queue and cache gauges first)."""
    rows = []
    for v in runs:
        scraped = v.summary.get("server_metrics")
        if not scraped:
            continue
        for key, entry in list(scraped["series"].items())[:8]:
            rows.append([v.name, md_code(key), number(entry["min"], 2), number(entry["mean"], 2),
                         number(entry["max"], 2), str(scraped["scrapes"])])  # fmt: skip
        if scraped["failed"]:
            rows.append([v.name, f"{scraped['failed']} scrapes failed", "–", "–", "–", "–"])
    header = ("Run", "Series", "Min", "Mean", "Max", "Scrapes")
    return table(header, rows, right=(2, 3, 4, 5)) if rows else None


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
                    md_text(priced),
                    md_code(lang),
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
