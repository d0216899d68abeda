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
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from perfbench import store
from perfbench.errors import StoreError
from perfbench.report import charts, html, release_md
from perfbench.stats.compare import Comparison, Rules, compare
from perfbench.stats.histogram import US, decode, new_hdr
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
    merged = new_hdr()
    for blob in blobs:
        merged.add(decode(blob))
    return merged


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
    try:
        figures = _draw(ordered, out)
        sweeps = _sweeps(ordered, out)
    except OSError as exc:  # a full disk, a folder made read-only
        raise StoreError(f"{out}: cannot write the report: {exc.strerror or exc}") from exc
    text = release_md.report(
        [_view(r) for r in ordered],
        baseline.name if baseline is not None else None,
        figures,
        _comparisons(baseline, ordered[1:], rules or Rules()),
        sweeps,
    )
    charts_used = [*figures.values(), *(chart for chart, _ in sweeps if chart)]
    path = _write(out / "report.md", text)
    _write(out / "report.html", html.page(text, _embedded(out, charts_used)))
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


def _embedded(out: Path, charts_used: Sequence[str]) -> dict[str, str]:
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
    """Every chart the runs have data for, by name → file name of its PNG."""
    names = [r.name for r in runs]
    across = [r.summary["across_runs"] for r in runs]
    figures: dict[str, str] = {}
    curves = {r.name: latency_curve(r.summary) for r in runs}
    charts.latency_distribution(curves, out / "latency")
    figures["latency"] = "latency.png"
    cases = sorted({c for a in across for c in a["cases"]})
    per_case = {
        name: {c: _triple(a["cases"].get(c, {}).get("latency.p95")) for c in cases}
        for name, a in zip(names, across, strict=True)
    }
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
    languages = sorted({lang for a in across for lang in a["languages"]})
    cost = {
        name: {
            lang: _median(a["languages"].get(lang, {}).get("cost_per_task")) for lang in languages
        }
        for name, a in zip(names, across, strict=True)
    }
    if any(v is not None for per in cost.values() for v in per.values()):
        simulated = any(str(r.meta.get("target", "")).startswith("mock") for r in runs)
        note = "simulated model; prices borrowed from the models it imitates" if simulated else None
        charts.language_cost(languages, cost, out / "cost", note=note)
        figures["cost"] = "cost.png"
    history = {r.name: r.summary["adaptive"]["history"] for r in runs if r.summary.get("adaptive")}
    if history:
        charts.adaptive_timeline(history, out / "adaptive")
        figures["adaptive"] = "adaptive.png"
    return figures


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
