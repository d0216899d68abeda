"""Charts as files (matplotlib, Agg backend). The same input gives byte-identical PNG and SVG:
no timestamps or software tags in the metadata, and a fixed SVG hash salt."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: never open a window, in CI or on a server
import matplotlib.pyplot as plt
from matplotlib import ticker

from perfbench.load.knee import Level

plt.rcParams["svg.hashsalt"] = "perfbench"


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
        label="429s or errors (% of tasks)",
    )
    bottom.set_ylabel("% of tasks")
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
    paths = [path_stem.with_suffix(".png"), path_stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=100, metadata={"Software": None})
    fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return paths
