"""The release report: run directories in, ``report.md`` with its charts and ``report.html``
out.

The I/O edge of reporting: it reads ``meta.json`` and ``summary.json`` (never samples.jsonl:
the encoded HDR histograms in the summary carry every distribution, so a report over a million
samples reads kilobytes), draws the charts and writes the Markdown that
:mod:`perfbench.report.release_md` renders, and the page :mod:`perfbench.report.html` makes of
it with the charts read back as data URIs.
"""

from __future__ import annotations

import base64
import math
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from perfbench import store
from perfbench.errors import StoreError
from perfbench.report import charts, html, release_md, split_chart
from perfbench.report.format import TITLES
from perfbench.report.listed import listed
from perfbench.stats import interval
from perfbench.stats.compare import Comparison, Row, Rules, compare
from perfbench.stats.histogram import US, pool
from perfbench.stats.server_metrics import KNOWN, USAGE, Scrape, metric_name, on_run_axis, rank
from perfbench.stats.summary import Summary
from perfbench.store.documents import Meta


@dataclass(frozen=True)
class RunData:
    """One run as the report needs it: its directory, meta and summary, and a short name."""

    path: Path
    meta: Meta
    summary: Summary

    @property
    def name(self) -> str:
        return str(self.meta.get("label") or self.meta["id"])


def latency_curve(summary: Mapping[str, Any], kind: str = "latency") -> list[tuple[float, float]]:
    """(percentile, seconds) points of the pooled distribution, HDR style: ever finer towards
    the tail, and no further than the number of values supports (1/(1−p) ≤ n)."""
    merged = _merged(summary, kind)
    if merged is None or not merged.total_count:
        return []
    points = []
    step = 0
    while True:
        p = 100 * (1 - 0.5 ** (step / 4))  # four points per halving of what is left
        if 1 / (1 - p / 100) > merged.total_count:
            break
        points.append((p, merged.get_value_at_percentile(p) / US))
        step += 1
    points.append((100 * (1 - 1 / merged.total_count), merged.get_max_value() / US))
    return points


def _merged(summary: Mapping[str, Any], kind: str) -> HdrHistogram | None:
    blobs = [b for key, b in summary.get("histograms", {}).items() if key.endswith("/" + kind)]
    if not blobs:
        return None
    return pool(blobs)


def load(ref: str, root: Path) -> RunData:
    """A run by directory, name or label; a run killed before its summary was written is
    summarised from its samples (its status, shown in the report, says it is incomplete)."""
    path = store.resolve_run(ref, root)
    meta = store.read_meta(path)
    return RunData(path, meta, store.read_summary(path, meta))


def build(
    runs: Sequence[RunData], baseline: RunData | None, out: Path, rules: Rules | None = None
) -> Path:
    """Write ``out/report.md``, its charts (``out/*.png``, ``out/*.svg``) and ``out/report.html``
    (the same report with the charts inside); return the path of report.md."""
    if not runs:
        raise StoreError("a report needs at least one run")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{out}: cannot create the report folder: {exc.strerror}") from None
    ordered = ([baseline] if baseline is not None else []) + [r for r in runs if r is not baseline]
    rules = rules or Rules()
    comparisons = _comparisons(baseline, ordered[1:], rules)
    try:
        figures = _draw(ordered, out)
        figures.update(_draw_changes(comparisons, baseline, rules, out))
        sweeps = _sweeps(ordered, out)
    except OSError as exc:  # a full disk, a folder made read-only
        raise StoreError(f"{out}: cannot write the report: {exc.strerror or exc}") from exc
    text = release_md.report(
        [_view(r) for r in ordered],
        baseline.name if baseline is not None else None,
        figures,
        comparisons,
        sweeps,
    )
    charts_used = [*figures.values(), *(chart for chart, _ in sweeps if chart)]
    path = _write(out / "report.md", text)
    _write(out / "report.html", html.page(text, embedded(out, charts_used)))
    return path


def _comparisons(
    baseline: RunData | None, others: Sequence[RunData], rules: Rules
) -> list[tuple[str, release_md.RunView, Comparison]]:
    """Each run against the baseline (none without one), by the rules `perfbench compare`
    applies, so the report's verdict is the gate's."""
    if baseline is None:
        return []
    return [(r.name, _view(r), compare(baseline.summary, r.summary, rules)) for r in others]


def _write(path: Path, text: str) -> Path:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror}") from None
    return path


def embedded(out: Path, charts_used: Sequence[str]) -> dict[str, str]:
    """Each chart the Markdown links (``x.png``) as the data URI report.html shows instead: its
    SVG, which stays sharp when zoomed and keeps its text as text."""
    images = {}
    for name in charts_used:
        svg = (out / name).with_suffix(".svg")
        chart, kind = (svg, "svg+xml") if svg.is_file() else (out / name, "png")
        data = base64.b64encode(chart.read_bytes()).decode("ascii")
        images[name] = f"data:image/{kind};base64,{data}"
    return images


def _sweeps(runs: Sequence[RunData], out: Path) -> list[tuple[str, str]]:
    """Each sweep once (at its first level in the report), however many of its levels are in."""
    firsts = {r.path.parent.resolve(): r for r in reversed(runs)}  # the earliest level wins
    return [
        _copy_sweep(r, out)
        for r in runs
        if firsts[r.path.parent.resolve()] is r and (r.path.parent / "sweep.md").is_file()
    ]


def _view(run: RunData) -> release_md.RunView:
    return release_md.RunView(run.name, run.meta, run.summary)


def _draw(runs: Sequence[RunData], out: Path) -> dict[str, str]:
    """Every chart the runs have data for, by name → file name of its PNG. A chart with
    nothing to show (no streamed task for TTFT, no price, old summaries without a timeline)
    is left out, never drawn empty."""
    figures: dict[str, str] = {}
    _distributions(runs, out, figures)
    _draw_timeline(runs, out, figures)
    names = [r.name for r in runs]
    across = [r.summary["across_runs"] for r in runs]
    cases = listed(across)  # past REPORT_CASES, the slowest: 10^5 bars are no chart
    per_case = {
        name: {c: _triple(a["cases"].get(c, {}).get("latency.p95")) for c in cases}
        for name, a in zip(names, across, strict=True)
    }
    if cases:
        charts.case_bars(cases, per_case, out / "cases", metric="P95")
        figures["cases"] = "cases.png"
    charts.throughput_errors(
        names,
        [_triple(a["overall"].get("throughput")) for a in across],
        [_median(a["overall"].get("error_rate")) for a in across],
        [_median(a["overall"].get("throttle_rate")) for a in across],
        out / "throughput",
    )
    figures["throughput"] = "throughput.png"
    tokens = [_triple(a["overall"].get("output_tokens_per_s")) for a in across]
    if any(t and t[0] for t in tokens):
        charts.tokens_per_second(names, tokens, out / "tokens")
        figures["tokens"] = "tokens.png"
    _draw_cost(runs, out, figures)
    split = split_chart.means_of({r.name: r.summary for r in runs}, set(cases))
    if split:
        split_chart.draw(split, out / "time_split")
        figures["time_split"] = "time_split.png"
    _draw_server(runs, out, figures)
    history = {r.name: r.summary["adaptive"]["history"] for r in runs if r.summary.get("adaptive")}
    if history:
        charts.adaptive_timeline(history, out / "adaptive")
        figures["adaptive"] = "adaptive.png"
    return figures


# name → (histogram kind, title, y axis) of the percentile charts, in the report's order.
DISTRIBUTIONS = {
    "latency": ("latency", "Task latency by percentile", "latency (ms)"),
    "ttft": ("ttft", "Time to first token by percentile", "TTFT (ms)"),
    "itl_pooled": ("itl_pooled", "Inter-token latency by percentile (every gap)", "ITL (ms)"),
    "itl": ("itl", "Inter-token latency by percentile (per task: its mean gap)", "ITL (ms)"),
}


def _distributions(runs: Sequence[RunData], out: Path, figures: dict[str, str]) -> None:
    """Latency, TTFT and ITL by percentile, each from the histograms the summaries stored (a
    run of a non-streaming target has no TTFT; summaries before ITL was recorded, no ITL)."""
    for name, (kind, title, ylabel) in DISTRIBUTIONS.items():
        curves = {r.name: latency_curve(r.summary, kind) for r in runs}
        if any(curves.values()):
            charts.latency_distribution(curves, out / name, title, ylabel=ylabel)
            figures[name] = f"{name}.png"


def _draw_cost(runs: Sequence[RunData], out: Path, figures: dict[str, str]) -> None:
    across = [r.summary["across_runs"] for r in runs]
    languages = sorted({lang for a in across for lang in a["languages"]})
    cost = {
        r.name: {
            lang: _median(a["languages"].get(lang, {}).get("cost_per_task")) for lang in languages
        }
        for r, a in zip(runs, across, strict=True)
    }
    if any(v for per in cost.values() for v in per.values()):  # None: unpriced; 0: free
        simulated = any(str(r.meta.get("target", "")).startswith("mock") for r in runs)
        note = "simulated model; prices borrowed from the models it imitates" if simulated else None
        charts.language_cost(languages, cost, out / "cost", note=note)
        figures["cost"] = "cost.png"


def timeline_slots(summary: Mapping[str, Any]) -> list[charts.TimeSlot]:
    """summary.json's ``timeline`` as chart slots; none for a summary written before it was
    recorded (or one whose timeline is not the shape this code writes)."""
    timeline = summary.get("timeline")
    if not isinstance(timeline, Mapping):
        return []
    width = timeline.get("bucket_s")
    buckets = timeline.get("buckets")
    if not isinstance(width, int | float) or width <= 0 or not isinstance(buckets, list):
        return []
    try:
        return [_slot(b, float(width)) for b in buckets]
    except (KeyError, TypeError, ValueError):
        return []


def _slot(bucket: Mapping[str, Any], width: float) -> charts.TimeSlot:
    p50, p95 = bucket.get("p50"), bucket.get("p95")
    return charts.TimeSlot(
        float(bucket["t"]),
        width,
        bucket["phase"] == "warmup",
        int(bucket["tasks"]),
        None if p50 is None else float(p50),
        None if p95 is None else float(p95),
    )


def _draw_timeline(runs: Sequence[RunData], out: Path, figures: dict[str, str]) -> None:
    series = {r.name: timeline_slots(r.summary) for r in runs}
    if any(series.values()):
        charts.latency_timeline(series, out / "timeline")
        figures["timeline"] = "timeline.png"


Points = list[tuple[float, float]]
PANEL_SERIES = 6  # lines a server panel can show apart, with a legend that still reads
KEPT_SERIES = 160  # series read from a page of thousands (the scraper keeps as many)


def _draw_server(runs: Sequence[RunData], out: Path, figures: dict[str, str]) -> None:
    """Per run with --server-metrics, its scraped gauges under its client timeline."""
    for index, run in enumerate(runs):
        scraped = server_series(run)
        if scraped is None:
            continue
        series, failed = scraped
        key = release_md.server_key(index)
        charts.server_timeline(
            timeline_slots(run.summary),
            server_panels(series),
            failed,
            out / key,
            title=f"Server metrics under the client's timeline: {run.name}",
            run=index,
        )
        figures[key] = f"{key}.png"


def server_series(run: RunData) -> tuple[dict[str, Points], list[float]] | None:
    """The run's server series (on the run's time axis) and the times of failed scrapes, from
    server_metrics.jsonl; from the summary's brief of them when the file is gone (not for a
    resumed run: the brief holds its last session's scrapes only, and a chart of part of the
    run would read as the whole). None for a run without server metrics."""
    series: dict[str, Points] = {}
    failed: list[float] = []
    lines = 0
    for scrape in _bounded(on_run_axis(store.read_server_metrics(run.path))):
        lines += 1
        if scrape.values is None:
            failed.append(scrape.t)
            continue
        for key, value in scrape.values.items():
            series.setdefault(key, []).append((scrape.t, value))
    if lines:
        for points in series.values():  # a gap in every line where a scrape failed
            points.extend((t, math.nan) for t in failed)
        return series, failed
    brief = run.summary.get("server_metrics")
    if not isinstance(brief, Mapping) or run.meta.get("resumed"):
        return None
    return _from_brief(brief), []


def _bounded(scrapes: Iterable[Scrape]) -> Iterator[Scrape]:
    """The scrapes with at most ``KEPT_SERIES`` series besides the known gauges (kept always),
    so a server of thousands of series costs the report no more than the scraper."""
    seen: set[str] = set()
    for scrape in scrapes:
        if scrape.values is None:
            yield scrape
            continue
        for key in scrape.values:
            if key not in seen and (len(seen) < KEPT_SERIES or _known(key)):
                seen.add(key)
        yield Scrape(scrape.t, {k: v for k, v in scrape.values.items() if k in seen})


def _from_brief(brief: Mapping[str, Any]) -> dict[str, Points]:
    series = brief.get("series")
    if not isinstance(series, Mapping):
        return {}
    try:
        return {str(k): [(float(t), float(v)) for t, v in e["points"]] for k, e in series.items()}
    except (KeyError, TypeError, ValueError):
        return {}


def server_panels(series: Mapping[str, Points]) -> list[charts.ServerPanel]:
    """The series the chart draws: the engines' known gauges (scraper order), request counts
    in one panel and KV-cache use (as %) in another; a server with none of them (not vLLM,
    SGLang nor TGI) shows its first other series by name, counters left out (a running total
    climbs with the run whatever the server does)."""
    ordered = sorted(series, key=lambda k: (rank(k), k))
    known = [k for k in ordered if _known(k)]
    requests = [k for k in known if metric_name(k) not in USAGE]
    usage = [k for k in known if metric_name(k) in USAGE]
    others = [] if known else [k for k in ordered if not metric_name(k).endswith("_total")]
    groups = (
        ("requests", requests, 1.0),
        ("KV cache use (%)", usage, 100.0),
        ("as scraped (no known gauge)", others, 1.0),
    )
    return [
        charts.ServerPanel(label, {k: _scaled(series[k], scale) for k in keys[:PANEL_SERIES]})
        for label, keys, scale in groups
        if keys
    ]


def _known(key: str) -> bool:
    return rank(key) < len(KNOWN)


def _scaled(points: Points, scale: float) -> Points:
    return [(t, scale * v if math.isfinite(v) else v) for t, v in sorted(points)]


RATE_LABELS = {"error_rate": "error rate (% of tasks)", "rate_429": "429 answers (per 100 tasks)"}


def _draw_changes(
    comparisons: Sequence[tuple[str, release_md.RunView, Comparison]],
    baseline: RunData | None,
    rules: Rules,
    out: Path,
) -> dict[str, str]:
    """Per candidate, the forest of its overall changes against the baseline."""
    figures: dict[str, str] = {}
    for index, (name, _, result) in enumerate(comparisons):
        relative, points = change_rows(result, rules)
        if not relative and not points:
            continue
        key = release_md.changes_key(index)
        charts.change_forest(
            relative,
            points,
            out / key,
            title=f"Change per metric: {name} against {baseline.name if baseline else '?'}",
            interval=f"{100 * (1 - 2 * result.alpha):g}% interval",
        )
        figures[key] = f"{key}.png"
    return figures


def change_rows(
    result: Comparison, rules: Rules
) -> tuple[list[charts.Change], list[charts.Change]]:
    """The overall rows of a comparison as the change chart draws them: relative changes of
    the medians (fractions), and error and 429 rates in points (near zero a ratio means
    nothing), the latter only when some run of either side had any."""
    relative: list[charts.Change] = []
    points: list[charts.Change] = []
    for row in result.rows:
        if row.scope != "overall" or row.baseline is None or row.candidate is None:
            continue
        label = TITLES.get(row.metric, row.metric) + ("" if row.gated else " (not gated)")
        base, cand = row.baseline.values, row.candidate.values
        low, high = interval.shift_interval(base, cand, result.alpha)
        if row.metric in RATE_LABELS:
            if any(base) or any(cand):
                label = RATE_LABELS[row.metric] + ("" if row.gated else " (not gated)")
                floor = 100 * rules.metric(row.metric).floor
                mid = 100 * (row.candidate.median - row.baseline.median)
                points.append(
                    charts.Change(label, mid, 100 * low, 100 * high, floor, _verdict(row))
                )
        elif row.change is not None:
            scale = abs(row.baseline.median)
            relative.append(
                charts.Change(
                    label, row.change, low / scale, high / scale, row.bar or 0.0, _verdict(row)
                )
            )
    return relative, points


def _verdict(row: Row) -> str:
    return row.verdict if row.verdict in charts.VERDICT_COLOURS else "pass"


def _triple(entry: Mapping[str, Any] | None) -> tuple[float, float, float] | None:
    return None if not entry else (entry["median"], entry["min"], entry["max"])


def _median(entry: Mapping[str, Any] | None) -> float | None:
    return None if not entry else float(entry["median"])


def _copy_sweep(run: RunData, out: Path) -> tuple[str, str]:
    """A run that is a level of a sweep brings the sweep's curve and findings along."""
    sweep = run.path.parent
    target = out / f"sweep-{sweep.name}"
    for suffix in (".png", ".svg"):
        chart = sweep / f"sweep{suffix}"
        if chart.is_file():
            shutil.copyfile(chart, target.with_suffix(suffix))
    text = (sweep / "sweep.md").read_text(encoding="utf-8")
    return (target.name + ".png", text) if target.with_suffix(".png").is_file() else ("", text)
