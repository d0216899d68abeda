"""sweep.md: a sweep's levels and findings as Markdown (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfbench.report.format import ms
from perfbench.stats.knee import Level, in_flight


def markdown(
    levels: list[Level],
    findings: Mapping[str, Any],
    *,
    rates: bool,
    slo: tuple[str, float] | None,
) -> str:
    """The sweep as Markdown: a table per level and the findings."""
    unit = "tasks/s" if rates else "concurrency"
    lines = [
        f"# Sweep over {unit}",
        "",
        f"| {unit} | tasks/s | P50 ms | P95 ms | P99 ms | errors | 429s per task | in flight |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in levels:
        sustained = in_flight(v)
        lines.append(
            f"| {v.level:g} | {v.throughput:.2f} | {ms(v.p50)} | {ms(v.p95)} | {ms(v.p99)} "
            f"| {v.error_rate:.1%} | {v.throttle_rate:.2f} "
            f"| {'–' if sustained is None else f'{sustained:.1f}'} |"
        )
    lines += ["", "## Findings", ""]
    knee = findings["knee"]
    if knee is not None:
        lines.append(
            f"- Knee at {knee:g} ({unit}); plateau {findings['plateau_throughput']:.2f} tasks/s."
        )
        for level, why in findings["stopped_by"].items():
            lines.append(f"  - {level}: {why}")
    elif findings["stopped_by"]:
        lines.append("- Even the lowest level broke a stop condition; try lower levels:")
        for level, why in findings["stopped_by"].items():
            lines.append(f"  - {level}: {why}")
    else:
        lines.append("- No stop condition was reached: no knee in the levels measured.")
    if findings["kneedle"] is not None:
        lines.append(f"- Kneedle knee of throughput on log2({unit}): {findings['kneedle']:g}.")
    fit = findings["usl"]
    if fit:
        n_star = "none" if fit["n_star"] is None else f"{fit['n_star']:.1f}"
        lines.append(
            f"- USL: σ={fit['sigma']:.4f}, κ={fit['kappa']:.5f}, N*={n_star}, R²={fit['r2']:.3f}."
        )
    if slo:
        lines.append(f"- Largest level with {slo[0]} < {slo[1]:g} s: {findings['slo_max_level']}.")
    if findings["client_bound_levels"]:
        levels_text = ", ".join(f"{v:g}" for v in findings["client_bound_levels"])
        lines.append(
            f"- The client could not keep the planned tasks in flight at {levels_text} "
            "(Little's law): those levels measure perfbench, not the target."
        )
    return "\n".join(lines) + "\n"
