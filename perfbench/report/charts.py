"""Charts as files (matplotlib, Agg backend). The same input gives byte-identical PNG and SVG:
no timestamps or software tags in the metadata, and a fixed SVG hash salt.

Every chart writes ``<stem>.png`` and ``<stem>.svg`` and returns both paths. The functions take
plain data, so Markdown reports and comparisons can call them without perfbench objects. Run
``i`` (in the order of the mapping or sequence given) has the same colour in every chart. SVG
text stays text (``svg.fonttype = "none"``), so labels are searchable; plotted bars and lines
carry stable SVG ids: ``bar-r<run>-c<group>`` and ``bar-whisker-r<run>`` (``throughput-`` and
``rate-`` in place of ``bar-`` in the two panels of `throughput_errors`, ``tokens-`` in
`tokens_per_second`), ``line-r<run>``; the timeline, change and sweep charts name theirs in
their docstrings. No chart draws a panel whose every value is zero: it is left out, and the
title says why (a panel of flat zeros reads as a missing chart, or as data)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib

matplotlib.use("Agg")  # headless: never open a window, in CI or on a server
import matplotlib.pyplot as plt
from matplotlib import ticker
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from perfbench.report.labels import fit, lines, widest
from perfbench.stats.knee import Level

plt.rcParams["svg.hashsalt"] = "perfbench"
plt.rcParams["svg.fonttype"] = "none"  # text as <text>, not glyph paths: searchable, smaller

# matplotlib's tab10, fixed here so run i keeps its colour whatever the rcParams say.
_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

Bar = tuple[float, float, float]  # (value, low, high); low/high only drawn as whiskers


def _colour(i: int) -> str:
    return _COLOURS[i % len(_COLOURS)]


def _literal(text: str) -> str:
    """Caller text shown as is: a ``$`` would otherwise start matplotlib mathtext."""
    return text.replace("$", r"\$")


def _line_width(i: int, n: int) -> float:
    """Earlier runs draw wider, so a later run on the same values leaves them visible."""
    return 1.4 + 0.4 * (n - 1 - i)


def _save(fig: Figure, stem: Path) -> list[Path]:
    """Write ``<stem>.png`` (100 dpi) and ``<stem>.svg`` without date or software metadata,
    close the figure and return both paths."""
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".svg")]
    fig.savefig(paths[0], dpi=100, metadata={"Software": None})
    fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return paths


def _no_data(ax: Axes, text: str = "no data") -> None:
    ax.text(
        0.5,
        0.5,
        text,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=12,
        color="dimgray",
    )


LEGEND_PT = 9.0
_HANDLE_INCHES = 0.45  # a legend entry's handle and the gaps beside it, at 9 pt
_LINE_INCHES = 0.2  # a 9-pt line of legend text
# Room for a y tick label (8 pt) beside the plot: at most ~3.2 of a 9-inch figure, leaving the
# plot most of it however long the case names and run labels are.
TICK_PT = 8.0
TICK_INCHES = 3.2
TICK_LINE_INCHES = 0.15


def _legend_texts(width: float, labels: Sequence[str]) -> list[str]:
    return [fit(label, width - 2 * _HANDLE_INCHES, LEGEND_PT) for label in labels]


def tick_labels(names: Sequence[str]) -> tuple[list[str], int]:
    """Names as y tick labels that fit beside the plot (literal), and the most lines one of
    them takes, to space the rows by."""
    fitted = [fit(name, TICK_INCHES, TICK_PT) for name in names]
    return [_literal(text) for text in fitted], max(lines(fitted), default=1)


def _legend_columns(width: float, texts: list[str]) -> int:
    per_column = widest(texts, LEGEND_PT) + _HANDLE_INCHES
    return max(1, min(len(texts), int(width // per_column)))


def _legend_height(width: float, labels: Sequence[str]) -> float:
    """Inches the run legend takes, to grow the figure by rather than squeeze the plot: a row
    is as tall as its entry of most lines."""
    texts = _legend_texts(width, labels)
    ncols = _legend_columns(width, texts)
    counts = lines(texts)
    rows = range(0, len(counts), ncols)
    return _LINE_INCHES * sum(max(counts[row : row + ncols]) for row in rows)


def _legend(fig: Figure, labels: Sequence[str], kind: str, above: Axes | None = None) -> None:
    """One entry per run, in run colours, below the figure (or just above the ``above`` axes),
    so long labels never cover data."""
    if not labels:
        return
    handles: list[Artist] = [
        Line2D([], [], color=_colour(i), linewidth=2) if kind == "line" else Patch(color=_colour(i))
        for i in range(len(labels))
    ]
    wrapped = _legend_texts(fig.get_figwidth(), labels)
    ncols = _legend_columns(fig.get_figwidth(), wrapped)
    texts = [_literal(text) for text in wrapped]
    if above is None:
        fig.legend(
            handles, texts, loc="outside lower center", ncols=ncols, fontsize=9, frameon=False
        )
    else:
        above.legend(
            handles,
            texts,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncols=ncols,
            fontsize=9,
            frameon=False,
        )


def _plain(value: float | None, scale: float = 1.0) -> Bar | None:
    """A bar without whiskers, or None for a missing or non-finite value."""
    if value is None or not math.isfinite(value):
        return None
    return (scale * value, math.nan, math.nan)


def _bars(
    ax: Axes,
    per_run: Sequence[Sequence[Bar | None]],
    *,
    horizontal: bool = False,
    whiskers: bool = False,
    scale: float = 1.0,
    gid: str = "bar",
) -> tuple[dict[int, BarContainer], list[tuple[int, float]]]:
    """Grouped bars: ``per_run[i][j]`` is run i at group j (centred on j), or None for no bar.
    Returns the bar container of each run that drew any, and (run, position) of missing bars."""
    n_runs = len(per_run)
    thickness = 0.8 / max(n_runs, 1)
    containers: dict[int, BarContainer] = {}
    missing: list[tuple[int, float]] = []
    for i, values in enumerate(per_run):
        offset = (i - (n_runs - 1) / 2) * thickness
        groups: list[int] = []
        positions: list[float] = []
        heights: list[float] = []
        below: list[float] = []
        above: list[float] = []
        for j, bar in enumerate(values):
            if bar is None or not math.isfinite(bar[0]):
                missing.append((i, j + offset))
                continue
            mid, low, high = (scale * v for v in bar)
            groups.append(j)
            positions.append(j + offset)
            heights.append(mid)
            below.append(mid - low if math.isfinite(low) and low < mid else 0.0)
            above.append(high - mid if math.isfinite(high) and high > mid else 0.0)
        if not positions:
            continue
        if horizontal:
            container = ax.barh(positions, heights, thickness, color=_colour(i))
        else:
            container = ax.bar(positions, heights, thickness, color=_colour(i))
        for j, patch in zip(groups, container.patches, strict=True):
            patch.set_gid(f"{gid}-r{i}-c{j}")
        containers[i] = container
        if whiskers:
            spread = [below, above]
            bars = ax.errorbar(
                heights if horizontal else positions,
                positions if horizontal else heights,
                xerr=spread if horizontal else None,
                yerr=None if horizontal else spread,
                fmt="none",
                ecolor="black",
                elinewidth=0.8,
                capsize=2,
            )
            for collection in bars.lines[2]:
                collection.set_gid(f"{gid}-whisker-r{i}")
    return containers, missing


def _percentile_ticks(largest: float) -> tuple[list[float], list[str]]:
    """HDR-style ticks 0%, 90%, 99%, 99.9%, ... at x = 1/(1 - p/100), up to ``largest`` x."""
    ticks: list[float] = []
    labels: list[str] = []
    k = 0
    while 10.0**k <= largest * (1 + 1e-9):
        ticks.append(10.0**k)
        labels.append(f"{100 - 100 / 10**k:.{max(k - 2, 0)}f}%")
        k += 1
    return ticks, labels


def _series(
    ax: Axes, xs: Sequence[float], ys: Sequence[float], gid: str, dash: str = "-", **style: Any
) -> Line2D:
    """One plotted series: a line through its points, or only the point when there is one (a
    line from one point would suggest a trend that was never measured)."""
    (line,) = ax.plot(xs, ys, linestyle=dash if len(xs) > 1 else "none", **style)
    line.set_gid(gid)
    return line


def sweep_chart(
    levels: list[Level],
    knee: float | None,
    path_stem: Path,
    unit: str,
    *,
    knee_label: str | None = None,
) -> list[Path]:
    """Throughput and P95 against level (log2 axis), then, each only when some level has any,
    429 answers per task and errors as % of tasks, each in a panel of its own (two units, two
    axes); the knee is a dashed line in every panel, labelled above the plot (``knee_label``,
    default "knee <level>") where no data can be. Writes ``<stem>.png`` and ``<stem>.svg``;
    returns both paths. SVG ids: ``sweep-throughput``, ``sweep-p95``, ``sweep-429``,
    ``sweep-errors``, ``sweep-knee-<panel>``."""
    xs = [v.level for v in levels]
    throttled = [v.throttle_rate for v in levels]
    errors = [100 * v.error_rate for v in levels]
    extra = [(name, ys) for name, ys in (("429", throttled), ("errors", errors)) if any(ys)]
    fig, axes = plt.subplots(
        1 + len(extra),
        1,
        figsize=(7, 4.4 + 1.8 * len(extra)),
        sharex=True,
        layout="constrained",
        height_ratios=[2.2] + [1.0] * len(extra),
        squeeze=False,
    )
    panels: list[Axes] = list(axes[:, 0])
    quiet = "" if extra else " (no errors or 429 answers at any level)"
    # The title's pad leaves a band above the plot for the knee's label, clear of every line.
    pad = 24 if knee is not None else 6
    panels[0].set_title(f"Sweep over {_literal(unit)}{quiet}", fontsize=11, pad=pad)
    handles = _sweep_top(panels[0], levels) + _sweep_rates(panels[1:], xs, extra)
    bottom = panels[-1]
    bottom.set_xlabel(_literal(unit))
    bottom.set_xscale("log", base=2)
    bottom.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    for k, ax in enumerate(panels):
        ax.grid(True, alpha=0.3)
        if knee is not None:
            ax.axvline(knee, color="black", linestyle="--", linewidth=1).set_gid(f"sweep-knee-{k}")
    if knee is not None:
        _knee_label(panels[0], knee, knee_label if knee_label is not None else f"knee {knee:g}")
    labels = [str(h.get_label()) for h in handles]
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    return _save(fig, path_stem)


def _sweep_top(top: Axes, levels: Sequence[Level]) -> list[Artist]:
    """Throughput on the left axis and P95 on a twin right axis, both from zero."""
    xs = [v.level for v in levels]
    throughput = [v.throughput for v in levels]
    handles: list[Artist] = [
        _series(top, xs, throughput, "sweep-throughput", marker="o", color="tab:blue",
                label="throughput (tasks/s)"),
    ]  # fmt: skip
    p95 = top.twinx()
    latencies = [(v.p95 or math.nan) * 1e3 for v in levels]
    handles.append(
        _series(p95, xs, latencies, "sweep-p95", marker="s", color="tab:orange",
                label="P95 latency (ms)")
    )  # fmt: skip
    top.set_ylabel("tasks/s")
    p95.set_ylabel("P95 ms")
    for ax in (top, p95):
        ax.set_ylim(bottom=0)
    return handles


# name → (legend, axis label, style) of the sweep's rate panels; the legend says exactly what
# each counts, since 429s per task may exceed 1 (retries) and is not a share of tasks.
_SWEEP_RATES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "429": ("429 answers per task (429s ÷ tasks)", "429s per task",
            {"marker": "^", "color": "tab:red"}),
    "errors": ("errors (% of tasks that failed)", "errors, % of tasks",
               {"marker": "v", "color": "tab:purple"}),
}  # fmt: skip


def _sweep_rates(
    panels: Sequence[Axes], xs: Sequence[float], rates: Sequence[tuple[str, Sequence[float]]]
) -> list[Artist]:
    handles: list[Artist] = []
    for ax, (name, ys) in zip(panels, rates, strict=True):
        label, axis, style = _SWEEP_RATES[name]
        handles.append(_series(ax, xs, ys, f"sweep-{name}", label=label, **style))
        ax.set_ylabel(axis)
        ax.set_ylim(bottom=0)
    return handles


def _knee_label(top: Axes, knee: float, text: str) -> None:
    """The label just above the plot frame at the knee's x, boxed: where no data can be."""
    top.annotate(
        _literal(text),
        xy=(knee, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(0, 5),
        textcoords="offset points",
        ha="center",
        va="bottom",
        fontsize=9,
        bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "black"},
        annotation_clip=False,
    )


def latency_distribution(
    series: Mapping[str, Sequence[tuple[float, float]]],
    stem: Path,
    title: str = "Task latency by percentile",
    *,
    ylabel: str = "latency (ms)",
) -> list[Path]:
    """HDR-style latency by percentile: per run label, (percentile in [0, 100), seconds) points
    as one line, on x = 1/(1 - p/100) (log axis labelled 0%, 90%, 99%, ...), y in ms. The
    same chart serves TTFT and ITL (``title``, ``ylabel``)."""
    labels = list(series)
    fig, ax = plt.subplots(figsize=(9, 4.5 + _legend_height(9, labels)), layout="constrained")
    ax.set_title(_literal(title))
    largest = 1.0
    for i, label in enumerate(labels):
        points = sorted((p, s) for p, s in series[label] if 0 <= p < 100 and math.isfinite(s))
        if not points:
            continue
        xs = [1 / (1 - p / 100) for p, _ in points]
        largest = max(largest, xs[-1])
        (line,) = ax.plot(
            xs,
            [1e3 * s for _, s in points],
            color=_colour(i),
            linewidth=_line_width(i, len(labels)),
            marker="o" if len(points) <= 25 else None,
            markersize=3,
        )
        line.set_gid(f"line-r{i}")
    ax.set_xscale("log", base=10)
    ax.set_xlim(1, max(largest, 2.0))
    ticks, tick_labels = _percentile_ticks(largest)
    ax.set_xticks(ticks, tick_labels)
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("percentile")
    ax.set_ylabel(_literal(ylabel))
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    if not ax.lines:
        _no_data(ax)
    _legend(fig, labels, "line")
    return _save(fig, stem)


def case_bars(
    cases: Sequence[str],
    runs: Mapping[str, Mapping[str, tuple[float, float, float] | None]],
    stem: Path,
    metric: str = "P95",
) -> list[Path]:
    """Per case, one horizontal bar per run label: the median (seconds, drawn in ms) with
    whiskers from min to max across runs. ``runs[label][case]`` None or absent: no bar. The
    figure grows with the number of cases and runs."""
    labels = list(runs)
    per_run = [[runs[label].get(case) for case in cases] for label in labels]
    ticks, most = tick_labels(cases)
    bar = max(0.1 * max(len(labels), 1) + 0.2, TICK_LINE_INCHES * most)  # inches per case
    height = 1.4 + _legend_height(9, labels) + bar * len(cases)
    fig, ax = plt.subplots(figsize=(9, max(height, 3.0)), layout="constrained")
    metric = _literal(metric)
    fig.suptitle(f"{metric} latency by case")
    containers, missing = _bars(ax, per_run, horizontal=True, whiskers=True, scale=1e3)
    for _, at in missing:
        ax.text(0, at, " n/a", transform=ax.get_yaxis_transform(), va="center", fontsize=6)
    ax.set_yticks(range(len(cases)), ticks, fontsize=8)
    ax.set_ylim(max(len(cases), 1) - 0.5, -0.5)  # first case on top
    ax.set_xlabel(f"{metric} (ms; bars: median across runs, whiskers: min–max)")
    ax.set_xlim(left=0)
    ax.grid(True, axis="x", alpha=0.3)
    if not containers:
        _no_data(ax)
    _legend(fig, labels, "patch", above=ax)
    return _save(fig, stem)


def throughput_errors(
    labels: Sequence[str],
    throughput: Sequence[tuple[float, float, float] | None],
    error_rate: Sequence[float | None],
    throttle_rate: Sequence[float | None],
    stem: Path,
) -> list[Path]:
    """Throughput per run (tasks/s; median bar, min–max whiskers), and beside it errors (% of
    tasks) and 429 answers (per 100 tasks) per run, drawn only when some run had any: a panel
    of zero-height bars says nothing, so the title says "no errors or 429 answers" instead.
    Sequences align with ``labels``; None draws no bar and notes "n/a"."""
    rows = list(zip(labels, throughput, error_rate, throttle_rate, strict=True))
    rated = any(err or thr for _, _, err, thr in rows)
    fig, panels = plt.subplots(
        1,
        2 if rated else 1,
        figsize=(10 if rated else 6, 4.2 + _legend_height(10 if rated else 6, labels)),
        layout="constrained",
        width_ratios=[1, 2] if rated else None,
        squeeze=False,
    )
    left = panels[0, 0]
    known = any(err is not None or thr is not None for _, _, err, thr in rows)
    if rated:
        fig.suptitle("Throughput, errors and 429s")
    else:
        fig.suptitle("Throughput (no errors or 429 answers in any run)" if known else "Throughput")
    done, missing = _bars(left, [[tp] for _, tp, _, _ in rows], whiskers=True, gid="throughput")
    left.set_xticks([0], ["throughput"])
    left.set_ylabel("tasks/s (median, whiskers: min–max)")
    drawn = [(left, done, missing)]
    if rated:
        right = panels[0, 1]
        rates = [[_plain(err, 100), _plain(thr, 100)] for _, _, err, thr in rows]
        shown, gaps = _bars(right, rates, gid="rate")
        for container in shown.values():
            right.bar_label(container, fmt="{:.1f}", fontsize=7, padding=1)
        right.set_xticks([0, 1], ["errors (% of tasks)", "429 answers (per 100 tasks)"])
        right.set_ylabel("% of tasks / 429s per 100 tasks")
        drawn.append((right, shown, gaps))
    for ax, bars, absent in drawn:
        ax.set_xlim(-0.5, len(ax.get_xticks()) - 0.5)
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
        for _, at in absent:
            ax.text(at, 0.02, "n/a", transform=ax.get_xaxis_transform(), ha="center", fontsize=7)
        if not bars:
            _no_data(ax)
    _legend(fig, labels, "patch")
    return _save(fig, stem)


def tokens_per_second(
    labels: Sequence[str], values: Sequence[tuple[float, float, float] | None], stem: Path
) -> list[Path]:
    """Output tokens per second per run label (median across its runs, min–max whiskers);
    None draws no bar and notes "n/a". SVG ids ``tokens-r<run>-c0``."""
    fig, ax = plt.subplots(figsize=(6, 4.2 + _legend_height(6, labels)), layout="constrained")
    ax.set_title("Output tokens per second")
    drawn, missing = _bars(ax, [[v] for v in values], whiskers=True, gid="tokens")
    ax.set_xticks([0], ["output tokens/s"])
    ax.set_xlim(-0.5, 0.5)
    ax.set_ylabel("tokens/s (median across runs, whiskers: min–max)")
    ax.set_ylim(bottom=0)
    ax.grid(True, axis="y", alpha=0.3)
    for _, at in missing:
        ax.text(at, 0.02, "n/a", transform=ax.get_xaxis_transform(), ha="center", fontsize=7)
    if not drawn:
        _no_data(ax)
    _legend(fig, labels, "patch")
    return _save(fig, stem)


def language_cost(
    languages: Sequence[str],
    runs: Mapping[str, Mapping[str, float | None]],
    stem: Path,
    unit: str = "USD per task",
    note: str | None = None,
) -> list[Path]:
    """Per language, one bar per run label. None (or absent) means unpriced: no bar, the word
    "unpriced" at its place. ``note`` (e.g. "simulated prices") is a small subtitle."""
    labels = list(runs)
    per_run = [[_plain(runs[label].get(language)) for language in languages] for label in labels]
    width = max(7.0, 1.2 + len(languages) * (0.3 * max(len(labels), 1) + 0.4))
    height = 4.2 + _legend_height(width, labels)
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    unit = _literal(unit)
    fig.suptitle(f"Cost by language ({unit})")
    if note:
        ax.set_title(_literal(note), fontsize=9, style="italic", color="dimgray")
    drawn, missing = _bars(ax, per_run)
    for _, at in missing:
        ax.text(
            at,
            0.02,
            "unpriced",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="center",
            va="bottom",
            fontsize=7,
            color="dimgray",
        )
    ax.set_xticks(range(len(languages)), [_literal(language) for language in languages])
    ax.set_xlim(-0.5, max(len(languages), 1) - 0.5)
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda y, _: f"{y:.3g}"))
    ax.grid(True, axis="y", alpha=0.3)
    if not drawn:
        _no_data(ax, "no data (all unpriced)" if missing else "no data")
    _legend(fig, labels, "patch")
    return _save(fig, stem)


def adaptive_timeline(
    history: Mapping[str, Sequence[tuple[float, float]]], stem: Path
) -> list[Path]:
    """The adaptive concurrency limit over time: per run label, (seconds since run start,
    limit) points as a step line (each value holds until the next)."""
    labels = list(history)
    fig, ax = plt.subplots(figsize=(9, 4.2 + _legend_height(9, labels)), layout="constrained")
    ax.set_title("Adaptive concurrency limit")
    for i, label in enumerate(labels):
        points = sorted(history[label])
        if not points:
            continue
        (line,) = ax.step(
            [t for t, _ in points],
            [v for _, v in points],
            where="post",
            color=_colour(i),
            linewidth=_line_width(i, len(labels)),
        )
        line.set_gid(f"line-r{i}")
    ax.set_xlabel("seconds since run start")
    ax.set_ylabel("concurrency limit")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    if not ax.lines:
        _no_data(ax)
    _legend(fig, labels, "line")
    return _save(fig, stem)


class TimeSlot(NamedTuple):
    """One slot of a run's timeline: its start and width (seconds since the session began),
    whether it holds warmup tasks, how many tasks ended in it, and their P50 and P95 latency
    (seconds; None when none of them succeeded)."""

    t: float
    width: float
    warmup: bool
    tasks: int
    p50: float | None
    p95: float | None


def latency_timeline(series: Mapping[str, Sequence[TimeSlot]], stem: Path) -> list[Path]:
    """Latency over time within each run label (P95 solid, P50 dashed, in ms) above the tasks
    finished per second, warmup slots shaded in the label's colour, so a cold start or a
    slowdown late in a run shows where averages would hide it. SVG ids: ``p95-r<run>``,
    ``p50-r<run>``, ``done-r<run>`` and ``warmup-r<run>``."""
    labels = list(series)
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(9, 5.6 + _legend_height(9, labels)),
        sharex=True,
        layout="constrained",
        height_ratios=[2, 1],
    )
    top.set_title("Latency over time (shaded: warmup)")
    for i, label in enumerate(labels):
        _client_timeline(top, bottom, series[label], i, len(labels))
    _client_axes(top, bottom)
    if not top.lines:
        _no_data(top)
        _no_data(bottom)
    _legend(fig, labels, "line")
    return _save(fig, stem)


def _client_timeline(top: Axes, bottom: Axes, slots: Sequence[TimeSlot], i: int, n: int) -> None:
    """Run ``i``'s P95 and P50 (ms) on ``top`` and its tasks finished per second on ``bottom``,
    its warmup shaded, in the run's colour."""
    slots = sorted(slots, key=lambda s: (s.t, not s.warmup))
    if not slots:
        return
    xs = [s.t + s.width / 2 for s in slots]
    style: dict[str, Any] = {
        "color": _colour(i),
        "linewidth": _line_width(i, n),
        "marker": "o" if len(slots) <= 25 else None,
        "markersize": 3,
    }
    _series(top, xs, [_ms(s.p95) for s in slots], f"p95-r{i}", **style)
    _series(top, xs, [_ms(s.p50) for s in slots], f"p50-r{i}", "--", **style)
    _series(bottom, xs, [s.tasks / s.width for s in slots], f"done-r{i}", **style)
    warm = [s for s in slots if s.warmup]
    if warm:  # warmup passes come first and back to back: one span covers them
        span = top.axvspan(warm[0].t, warm[-1].t + warm[-1].width, color=_colour(i), alpha=0.12)
        span.set_gid(f"warmup-r{i}")


def _client_axes(top: Axes, bottom: Axes) -> None:
    top.set_ylabel("latency (ms; solid P95, dashed P50)")
    top.set_ylim(bottom=0)
    bottom.set_ylabel("tasks finished/s")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("seconds since the run started (warmup passes first)")
    for ax in (top, bottom):
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)


class ServerPanel(NamedTuple):
    """One panel of the server's series under a run's timeline: its y axis label and, by
    series name, (seconds since the run started, value) points; a NaN value is a gap (a
    scrape that failed), so no line is drawn across what was not read."""

    ylabel: str
    series: Mapping[str, Sequence[tuple[float, float]]]


# The server's series, apart from the run colours: in this chart the run is one colour (its
# client lines), and a series coloured like another run would read as one.
_SERIES_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d")


def server_timeline(
    slots: Sequence[TimeSlot],
    panels: Sequence[ServerPanel],
    failed: Sequence[float],
    stem: Path,
    *,
    title: str,
    run: int = 0,
) -> list[Path]:
    """One run's client timeline (P95 and P50 latency, tasks finished per second, warmup
    shaded, in the colour of run ``run``) above the server's own series, a panel each (request
    counts apart from cache use), all on one time axis in seconds since the run started, so a
    latency rise can be read against the queue that grew under it. Scrapes that failed are red
    crosses on the lowest panel. SVG ids: those of `latency_timeline` for the run,
    ``server-p<panel>-s<series>`` and ``scrape-failed``."""
    rows = max(len(panels), 1)
    fig, axes = plt.subplots(
        2 + rows,
        1,
        figsize=(9, 5.0 + 1.9 * rows),
        sharex=True,
        layout="constrained",
        height_ratios=[2.0, 1.0] + [1.3] * rows,
        squeeze=False,
    )
    top, tasks, *below = list(axes[:, 0])
    fig.suptitle(_literal(title))
    top.set_title("client: latency over time (shaded: warmup)", fontsize=10)
    _client_timeline(top, tasks, slots, run, run + 1)
    _client_axes(top, tasks)
    tasks.set_xlabel("")
    if not top.lines:
        _no_data(top, "no client timeline in the summary")
        _no_data(tasks, "no client timeline in the summary")
    for k, (ax, panel) in enumerate(zip(below, panels, strict=False)):
        _server_panel(ax, panel, k)
    if not panels:
        _no_data(below[0], "no series scraped (every scrape failed)")
    if failed:
        crosses = below[-1].plot(
            list(failed),
            [0.04] * len(failed),
            transform=below[-1].get_xaxis_transform(),  # just above the axis, whatever its scale
            marker="x",
            color="#d62728",
            linestyle="none",
            label="scrape failed",
        )[0]
        crosses.set_gid("scrape-failed")
        below[-1].legend(loc="upper left", fontsize=7, frameon=False)
    below[-1].set_xlabel("seconds since the run started (warmup passes first)")
    for ax in below:
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    return _save(fig, stem)


def _server_panel(ax: Axes, panel: ServerPanel, k: int) -> None:
    for j, (key, points) in enumerate(panel.series.items()):
        _series(
            ax,
            [t for t, _ in points],
            [v for _, v in points],
            f"server-p{k}-s{j}",
            color=_SERIES_COLOURS[j % len(_SERIES_COLOURS)],
            linewidth=1.4,
            marker="o" if len(points) <= 25 else None,
            markersize=3,
            label=_literal(key),
        )
    ax.set_ylabel(_literal(panel.ylabel), fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=7, frameon=False)


def _ms(seconds: float | None) -> float:
    return math.nan if seconds is None else 1e3 * seconds


class Change(NamedTuple):
    """One metric's change, candidate against baseline: the point (the change of the medians),
    its interval, the bar a change must pass to count (drawn ±), and the comparison's verdict
    ("regression", "improvement", "inconclusive" or "pass")."""

    label: str
    change: float
    low: float
    high: float
    bar: float
    verdict: str


# What regressed stands out: red; improvements green; inconclusive grey, hollow; a pass dark.
VERDICT_COLOURS = {
    "regression": "#d62728",
    "improvement": "#2ca02c",
    "inconclusive": "#8c8c8c",
    "pass": "#404040",
}
_VERDICT_NAMES = {
    "regression": "regression",
    "improvement": "improvement",
    "inconclusive": "inconclusive (needs more runs)",
    "pass": "no change that counts",
}


def change_forest(
    relative: Sequence[Change],
    points: Sequence[Change],
    stem: Path,
    *,
    title: str = "Change per metric",
    interval: str = "interval",
) -> list[Path]:
    """A forest plot of per-metric changes: each metric a row with its change as a dot and
    ``interval`` as a line through it, on a grey band of ± its bar (inside the band a change
    does not count), coloured by verdict. ``relative`` changes are fractions (drawn in %);
    ``points`` (error and 429 rates) are in percentage points, in a panel of their own, drawn
    only when given. SVG ids: ``change-c<j>`` (the dot), ``change-interval-c<j>`` and
    ``change-band-c<j>``; ``points-`` in place of ``change-`` in the second panel."""
    groups = [
        (rows, scale, prefix)
        for rows, scale, prefix in ((relative, 100.0, "change"), (points, 1.0, "points"))
        if rows
    ]
    heights = [max(len(rows), 1) * 0.42 + 0.9 for rows, _, _ in groups] or [2.0]
    fig, axes = plt.subplots(
        len(heights),
        1,
        figsize=(9, sum(heights) + 1.3),
        layout="constrained",
        height_ratios=heights,
        squeeze=False,
    )
    fig.suptitle(_literal(title))
    for ax, (rows, scale, prefix) in zip(axes[:, 0], groups, strict=False):
        _forest(ax, rows, scale, prefix)
        unit = "%" if prefix == "change" else " pts"
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _, u=unit: f"{x:+g}{u}"))
        ax.set_xlabel(
            "change of the candidate's median (%)"
            if prefix == "change"
            else "change in points (errors: % of tasks; 429 answers: per 100 tasks)"
        )
    if not groups:
        _no_data(axes[0, 0])
    axes[0, 0].set_title(
        f"dot: change of the median; line: {_literal(interval)}; "
        "grey band: ± the change that counts (threshold or noise)",
        fontsize=9,
        color="dimgray",
    )
    shown = [
        v for v in VERDICT_COLOURS if any(r.verdict == v for rows, _, _ in groups for r in rows)
    ]
    handles: list[Artist] = [
        Line2D(
            [],
            [],
            color=VERDICT_COLOURS[v],
            marker="o",
            linewidth=2,
            markerfacecolor="white" if v == "inconclusive" else VERDICT_COLOURS[v],
        )
        for v in shown
    ]
    names = [_VERDICT_NAMES[v] for v in shown]
    fig.legend(handles, names, loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    return _save(fig, stem)


def _forest(ax: Axes, rows: Sequence[Change], scale: float, prefix: str) -> None:
    """The rows top to bottom; x limits symmetric about 0 so a change's sign reads at once."""
    reach = 0.0
    for j, row in enumerate(rows):
        colour = VERDICT_COLOURS.get(row.verdict, VERDICT_COLOURS["pass"])
        mid, low, high, bar = (scale * v for v in (row.change, row.low, row.high, row.bar))
        if bar > 0:
            band = ax.barh(j, 2 * bar, left=-bar, height=0.7, color="#e6e6e6", zorder=1)
            band.patches[0].set_gid(f"{prefix}-band-c{j}")
        segment = ax.hlines(j, low, high, color=colour, linewidth=2.2, zorder=3)
        segment.set_gid(f"{prefix}-interval-c{j}")
        hollow = row.verdict == "inconclusive"
        (dot,) = ax.plot(
            [mid],
            [j],
            marker="o",
            markersize=7,
            color=colour,
            zorder=4,
            markerfacecolor="white" if hollow else colour,
            linestyle="none",
        )
        dot.set_gid(f"{prefix}-c{j}")
        ax.annotate(
            f"{mid:+.1f}{'%' if prefix == 'change' else ' pts'}",
            (high, j),
            xytext=(5, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color=colour,
        )
        reach = max(reach, abs(low), abs(high), bar)
    reach = 1.25 * reach or 1.0
    ax.set_xlim(-reach, reach * 1.15)  # room on the right for the value labels
    ax.axvline(0, color="black", linewidth=0.8, zorder=2)
    ax.set_yticks(range(len(rows)), [_literal(r.label) for r in rows], fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first metric on top
    ax.grid(True, axis="x", alpha=0.3)


def history_chart(
    title: str,
    runs: Sequence[str],
    values: Sequence[float | None],
    shifts: Sequence[tuple[int, float, float, bool]],
    unit: str,
    stem: Path,
) -> list[Path]:
    """One metric over a series of runs (in ms for a duration), each change point a vertical
    line before its run (red: for the worse, green: for the better) and the segments' means as
    horizontal steps. ``shifts``: (index, mean before, mean after, worse). SVG ids:
    ``series``, ``shift-<index>``."""
    scale = 1e3 if unit == "s" else 1.0
    fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
    ax.set_title(_literal(title))
    xs = [i for i, v in enumerate(values) if v is not None]
    ax.plot(xs, [(values[i] or 0.0) * scale for i in xs], "o-", color=_colour(0), gid="series")
    edges = [0, *(s[0] for s in shifts), len(values)]
    means = [*(s[1] for s in shifts[:1]), *(s[2] for s in shifts)]
    for (start, end), mean in zip(itertools.pairwise(edges), means, strict=False):
        ax.hlines(mean * scale, start - 0.4, end - 0.6, colors="#7f7f7f", linestyles="dashed")
    for index, _, _, worse in shifts:
        colour = "#d62728" if worse else "#2ca02c"
        ax.axvline(index - 0.5, color=colour, linewidth=2, gid=f"shift-{index}")
    ax.set_xticks(range(len(runs)), [_literal(r) for r in runs], rotation=45, ha="right")
    ax.set_ylabel("ms" if unit == "s" else _literal(unit))
    ax.grid(axis="y", alpha=0.3)
    if not xs:
        _no_data(ax)
    return _save(fig, stem)
