"""The release report's time-split chart: per case and run, one horizontal bar stacked from
the mean model, tool, agent's own and client time of a successful task (stats/breakdown.py;
means, because they add up to the mean latency where percentiles do not). matplotlib (Agg),
written as PNG and SVG like every chart of the report."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt

from perfbench.report import charts
from perfbench.stats.breakdown import NAMES, PARTS

Means = Mapping[str, Mapping[str, Mapping[str, float]]]  # run → case → part → mean seconds


def draw(means: Means, stem: Path) -> list[Path]:
    """``means[run][case][part]``; a case a run lacks has no bar."""
    runs = list(means)
    cases = sorted({case for per_case in means.values() for case in per_case})
    rows = [(case, run) for case in cases for run in runs if case in means[run]]
    labels, most = charts.tick_labels(
        [f"{case} · {run}" if len(runs) > 1 else case for case, run in rows]
    )
    row = max(0.28, charts.TICK_LINE_INCHES * most)  # inches
    fig, ax = plt.subplots(figsize=(9, max(3.0, 1.6 + row * len(rows))), layout="constrained")
    fig.suptitle("Where a successful task's time went, per case (mean)")
    left = [0.0] * len(rows)
    for k, part in enumerate(PARTS):
        widths = [means[run][case].get(part, 0.0) * 1e3 for case, run in rows]
        ax.barh(range(len(rows)), widths, left=left, color=charts._colour(k), label=NAMES[part])
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)  # first case on top
    ax.set_xlabel("ms (mean over the successful tasks, all runs pooled)")
    ax.set_xlim(left=0)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return charts._save(fig, stem)


def means_of(
    summaries: Mapping[str, Mapping[str, object]], shown: Container[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """Each run's pooled per-case means of the parts, from summary.json (none before the
    split existed), for the ``shown`` cases (report/listed.py)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for run, summary in summaries.items():
        pooled = summary.get("pooled")
        cases = pooled.get("cases", {}) if isinstance(pooled, Mapping) else {}
        for case, m in cases.items():
            if case not in shown:
                continue
            split = m.get("time_split") if isinstance(m, Mapping) else None
            if not split or not (split.get("model") or {}).get("n"):
                continue
            out.setdefault(run, {})[case] = {
                part: (split.get(part) or {}).get("mean") or 0.0 for part in PARTS
            }
    return out


__all__: Sequence[str] = ("draw", "means_of")
