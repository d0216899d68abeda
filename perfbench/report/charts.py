"""Charts as files (matplotlib, Agg backend). The same input gives byte-identical PNG and SVG:
no timestamps or software tags in the metadata, and a fixed SVG hash salt.

Every chart writes ``<stem>.png`` and ``<stem>.svg`` and returns both paths. The functions take
plain data, so Markdown reports and comparisons can call them without perfbench objects. Run
``i`` (in the order of the mapping or sequence given) has the same colour in every chart. SVG
text stays text (``svg.fonttype = "none"``), so labels are searchable; plotted bars and lines
carry stable SVG ids: ``bar-r<run>-c<group>`` and ``bar-whisker-r<run>`` (``throughput-`` and
``rate-`` in place of ``bar-`` in the two panels of `throughput_errors`), ``line-r<run>``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def _legend_columns(width: float, labels: Sequence[str]) -> int:
    per_column = (max((len(label) for label in labels), default=0) + 6) * 0.075  # inches, 9 pt
    return max(1, min(len(labels), int(width // per_column)))


def _legend_height(width: float, labels: Sequence[str]) -> float:
    """Inches the run legend takes, to grow the figure by rather than squeeze the plot."""
    return 0.2 * math.ceil(len(labels) / _legend_columns(width, labels))


def _legend(fig: Figure, labels: Sequence[str], kind: str, above: Axes | None = None) -> None:
    """One entry per run, in run colours, below the figure (or just above the ``above`` axes),
    so long labels never cover data."""
    if not labels:
        return
    handles: list[Artist] = [
        Line2D([], [], color=_colour(i), linewidth=2) if kind == "line" else Patch(color=_colour(i))
        for i in range(len(labels))
    ]
    ncols = _legend_columns(fig.get_figwidth(), labels)
    texts = [_literal(label) for label in labels]
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


def sweep_chart(levels: list[Level], knee: float | None, path_stem: Path, unit: str) -> list[Path]:
    """Throughput, P95 and 429 rate against level (log2 axis), the knee marked. Writes
    ``<stem>.png`` and ``<stem>.svg``; returns both paths."""
    xs = [v.level for v in levels]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True, layout="constrained")
    top.plot(
        xs,
        [v.throughput for v in levels],
        marker="o",
        color="tab:blue",
        label="throughput (tasks/s)",
    )
    top.set_ylabel("tasks/s")
    p95 = top.twinx()
    p95.plot(
        xs,
        [(v.p95 or math.nan) * 1e3 for v in levels],
        marker="s",
        color="tab:orange",
        label="P95 (ms)",
    )
    p95.set_ylabel("P95 ms")
    bottom.plot(
        xs,
        [100 * max(v.throttle_rate, v.error_rate) for v in levels],
        marker="^",
        color="tab:red",
        label="errors (% of tasks) or 429 answers (per 100 tasks)",
    )
    bottom.set_ylabel("% of tasks / per 100 tasks")
    bottom.set_xlabel(unit)
    bottom.set_xscale("log", base=2)
    bottom.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    for axis in (top, bottom):
        axis.grid(True, alpha=0.3)
        if knee is not None:
            axis.axvline(knee, color="black", linestyle="--", linewidth=1)
    if knee is not None:
        top.annotate(
            f"knee {knee:g}", (knee, top.get_ylim()[1]), xytext=(4, -14), textcoords="offset points"
        )
    handles = top.get_legend_handles_labels()[0] + p95.get_legend_handles_labels()[0]
    top.legend(handles=handles, loc="upper left")
    bottom.legend(loc="upper left")
    return _save(fig, path_stem)


def latency_distribution(
    series: Mapping[str, Sequence[tuple[float, float]]],
    stem: Path,
    title: str = "Task latency by percentile",
) -> list[Path]:
    """HDR-style latency by percentile: per run label, (percentile in [0, 100), seconds) points
    as one line, on x = 1/(1 - p/100) (log axis labelled 0%, 90%, 99%, ...), y in ms."""
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
    ax.set_ylabel("latency (ms)")
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
    bar = 0.1 * max(len(labels), 1) + 0.2  # inches per case
    height = 1.4 + _legend_height(9, labels) + bar * len(cases)
    fig, ax = plt.subplots(figsize=(9, max(height, 3.0)), layout="constrained")
    metric = _literal(metric)
    fig.suptitle(f"{metric} latency by case")
    containers, missing = _bars(ax, per_run, horizontal=True, whiskers=True, scale=1e3)
    for _, at in missing:
        ax.text(0, at, " n/a", transform=ax.get_yaxis_transform(), va="center", fontsize=6)
    ax.set_yticks(range(len(cases)), [_literal(case) for case in cases], fontsize=8)
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
    """Two panels: throughput per run (tasks/s; median bar, min–max whiskers), and error and
    429 rates per run (fractions of tasks, drawn in %). Sequences align with ``labels``; None
    draws no bar and notes "n/a"."""
    rows = list(zip(labels, throughput, error_rate, throttle_rate, strict=True))
    fig, (left, right) = plt.subplots(
        1,
        2,
        figsize=(10, 4.2 + _legend_height(10, labels)),
        layout="constrained",
        width_ratios=[1, 2],
    )
    fig.suptitle("Throughput, errors and 429s")
    done, missing = _bars(left, [[tp] for _, tp, _, _ in rows], whiskers=True, gid="throughput")
    left.set_xticks([0], ["throughput"])
    left.set_ylabel("tasks/s (median, whiskers: min–max)")
    rates = [[_plain(err, 100), _plain(thr, 100)] for _, _, err, thr in rows]
    shown, gaps = _bars(right, rates, gid="rate")
    for container in shown.values():
        right.bar_label(container, fmt="{:.1f}", fontsize=7, padding=1)
    right.set_xticks([0, 1], ["errors (% of tasks)", "429 answers (per 100 tasks)"])
    right.set_ylabel("% of tasks / per 100 tasks")
    for ax, drawn, absent in ((left, done, missing), (right, shown, gaps)):
        ax.set_xlim(-0.5, len(ax.get_xticks()) - 0.5)
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
        for _, at in absent:
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
