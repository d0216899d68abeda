"""sweep.md: a sweep's levels and findings as Markdown (pure). The CLI prints the same text
after a sweep, so what it advises must be something the user can do."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from perfbench.report.format import THIN, THIN_NOTE, ms, thin
from perfbench.stats import presets
from perfbench.stats.knee import PERCENTILES, USL_MIN_R2, Level, in_flight

# The knee is named for what ended the growth: a rate-limit knee measures the provider's
# quota, not the target's capacity, and reads differently.
KNEE_NAMES = {
    "rate-limit": ("Rate-limit knee", "429s ended the growth"),
    "errors": ("Error knee", "errors ended the growth"),
    "latency": ("Latency knee", "P95 grew past its bound"),
    "throughput": ("Throughput knee", "throughput stopped growing"),
}


class SweptPlan(Protocol):
    """What the rendering needs of a sweep's plan (``spec.SweepPlan``)."""

    @property
    def rates(self) -> bool: ...
    @property
    def slo(self) -> tuple[str, float] | None: ...


class Swept(Protocol):
    """A finished sweep as the engine returns it (``engine.results.SweepResult``): the report
    layer sits below the engine, so it names the fields it reads, not the engine's class."""

    @property
    def path(self) -> Path: ...
    @property
    def levels(self) -> list[Level]: ...
    @property
    def findings(self) -> Mapping[str, Any]: ...
    @property
    def plan(self) -> SweptPlan: ...
    @property
    def interrupted(self) -> bool: ...


def render(result: Swept) -> str:
    """sweep.md's text for a sweep's result: what the CLI prints and ``report.sweep`` writes."""
    plan = result.plan
    return markdown(
        result.levels, result.findings, rates=plan.rates, slo=plan.slo, cut=result.interrupted
    )


def knee_label(findings: Mapping[str, Any]) -> str | None:
    """The chart's label for the knee, named as the summary names it ("rate-limit knee 7");
    None when the knee has no kind (the chart then says "knee 7")."""
    knee, kind = findings.get("knee"), findings.get("knee_kind")
    if knee is None or kind not in KNEE_NAMES:
        return None
    return f"{KNEE_NAMES[kind][0].lower()} {knee:g}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def markdown(
    levels: list[Level],
    findings: Mapping[str, Any],
    *,
    rates: bool,
    slo: tuple[str, float] | None,
    cut: bool = False,
) -> str:
    """The sweep as Markdown: a table per level and the findings (``cut``: the sweep was
    interrupted, so not finding a knee says nothing of the target)."""
    unit = "tasks/s" if rates else "concurrency"
    lines = [
        f"# Sweep over {unit}",
        "",
        f"| {unit} | tasks/s | P50 ms | P95 ms | P99 ms | errors | 429s per task | in flight "
        "| success |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in levels:
        sustained = in_flight(v)
        p50, p95, p99 = (_pct(v, key) for key in ("p50", "p95", "p99"))
        lines.append(
            f"| {v.level:g} | {v.throughput:.2f} | {p50} | {p95} | {p99} "
            f"| {v.error_rate:.1%} | {v.throttle_rate:.2f} "
            f"| {'–' if sustained is None else f'{sustained:.1f}'} | {_rate(v.success_rate)} |"
        )
    marked = any(THIN in line for line in lines[4:])
    lines += [
        "",
        *([THIN_NOTE, ""] if marked else []),
        "in flight: the mean tasks in flight by Little's law (tasks/s × the mean latency of "
        "successful tasks); failed tasks and the client's own time between tasks are not in it. "
        "success: tasks that finished ok and as their case expects.",
        "",
        "## Findings",
        "",
    ]
    lines += _knee(levels, findings, unit, rates) if not cut or findings["knee"] else _cut(levels)
    if findings["kneedle"] is not None:
        lines.append(f"- Kneedle knee of throughput on log2({unit}): {findings['kneedle']:g}.")
    lines += _usl(findings["usl"])
    if slo:
        lines.append(_slo_line(slo, findings["slo_max_level"]))
    if findings["client_bound_levels"]:
        levels_text = ", ".join(f"{v:g}" for v in findings["client_bound_levels"])
        lines.append(
            f"- The client could not keep the planned tasks in flight at {levels_text} "
            "(Little's law): those levels measure perfbench, not the target."
        )
    return "\n".join(lines) + "\n"


def _pct(level: Level, key: str) -> str:
    """A level's percentile, marked when a run of it had too few successful tasks to mean it
    (16 tasks a level: its P95 and P99 were both the slowest task)."""
    ok = level.tasks * (1.0 - level.error_rate)  # medians across runs: the run's successes
    return ms(getattr(level, key)) + (THIN if thin(round(ok), key) else "")


def _slo_line(slo: tuple[str, float], largest: float | None) -> str:
    metric, limit = slo
    found = "none" if largest is None else f"{largest:g}"
    if metric in PERCENTILES:
        return f"- Largest level with {metric} < {limit:g} s: {found}."
    if presets.is_preset_name(metric):
        return f"- Largest level meeting {metric} (each objective at its P99): {found}."
    return f"- Largest level where {limit:.0%} of tasks met every objective ({metric}): {found}."


def _knee(levels: list[Level], findings: Mapping[str, Any], unit: str, rates: bool) -> list[str]:
    knee, stopped = findings["knee"], findings["stopped_by"]
    if knee is not None:
        name, why = KNEE_NAMES.get(findings.get("knee_kind") or "", ("Knee", ""))
        because = f": {why}" if why else ""
        lines = [f"- {name} at {knee:g} ({unit}){because}; {_knee_figure(findings)}"]
        if findings.get("knee_kind") == "rate-limit":
            lines.append(
                "  It is the provider's rate limit, not the target's capacity: a longer run "
                "spends the limit's burst allowance and may meet it lower."
            )
        return lines + _stops(stopped)
    if stopped and levels:
        return [_below_lowest(levels[0], findings, unit, rates), *_stops(stopped)]
    return ["- No stop condition was reached: no knee in the levels measured."]


def _cut(levels: list[Level]) -> list[str]:
    """An interrupted sweep without a knee read "No stop condition was reached", as if it had
    gone the whole way (over an empty table when stopped in the first level's warmup)."""
    count = len(levels)
    when = f"after {count} level{'s' if count != 1 else ''}" if count else "before any level"
    return [f"- The sweep was interrupted {when}: no knee yet; its --resume measures the rest."]


def _knee_figure(findings: Mapping[str, Any]) -> str:
    """The knee's throughput, named for what it is: a plateau only where throughput stopped
    growing; and a level above the knee that completed more, said beside it (a rate-limit
    knee at 7 with 9.62 tasks/s read as a plateau while 8 did 12.17, its 429s retried)."""
    at_knee = findings.get("knee_throughput")
    if at_knee is None:  # findings written before knee_throughput
        at_knee = findings.get("plateau_throughput")
    if at_knee is None:
        return "no throughput measured at the knee."
    if findings.get("knee_kind") == "throughput":
        return f"plateau {at_knee:.2f} tasks/s."
    text = f"{at_knee:.2f} tasks/s at the knee"
    more = findings.get("beyond_knee")
    if more:
        retried = ", its 429s retried" if more.get("throttle_rate") else ""
        text += (
            f"; {more['level']:g} completed more ({more['throughput']:.2f} tasks/s{retried}): "
            "throughput had not stopped growing"
        )
    return text + "."


def _stops(stopped: Mapping[str, str]) -> list[str]:
    return [f"  - {float(level):g}: {why}" for level, why in stopped.items()]


def _below_lowest(lowest: Level, findings: Mapping[str, Any], unit: str, rates: bool) -> str:
    """The lowest level already broke a stop condition. Lower levels are the advice only
    when there are lower levels: below concurrency 1 there are none."""
    if rates or lowest.level > 1:
        return (
            f"- Even the lowest level ({lowest.level:g} {unit}) broke a stop condition; "
            "try lower levels:"
        )
    kind = (findings.get("stop_kinds") or {}).get(str(lowest.level))
    if kind is None:  # findings written before stop kinds: judge from the level's figures
        kind = "rate-limit" if lowest.throttle_rate > 0 else "errors"
    if kind != "rate-limit":
        return (
            f"- Even concurrency 1 failed {lowest.error_rate:.1%} of its tasks: the target fails "
            "one task at a time, so no level finds a knee. Fix the failures in level-1's "
            "samples.jsonl first:"
        )
    return (
        f"- The rate limit is below the lowest level: even concurrency 1 drew "
        f"{lowest.throttle_rate:.2f} 429 answers per task, so no concurrency finds a knee. "
        f"Sweep open-loop rates around what one task at a time completed "
        f"({lowest.throughput:.2f} tasks/s) to find the limit in tasks/s, e.g. "
        f"`{_rates_hint(lowest.throughput)}`, or ask the provider for a higher limit:"
    )


def _rates_hint(throughput: float) -> str:
    """Three --rates on the 1-2-5 series, the top one at or past what concurrency 1 completed:
    levels under the limit and one over it, for the rate sweep to find the knee between."""
    series = [m * 10.0**e for e in range(-3, 5) for m in (1, 2, 5)]
    if throughput <= 0:
        return "--rates 0.1,0.2,0.5"
    top = next((i for i, v in enumerate(series) if v >= throughput), len(series) - 1)
    return "--rates " + ",".join(f"{v:g}" for v in series[max(0, top - 2) : top + 1])


def _usl(fit: Mapping[str, Any] | None) -> list[str]:
    """The USL fit, its peak N* withheld when the curve misses the points (R² under
    USL_MIN_R2): a poor fit's N* is an extrapolation of a model that does not describe the
    target, and read as a prediction it misleads."""
    if not fit:
        return []
    shape = f"σ={fit['sigma']:.4f}, κ={fit['kappa']:.5f}, R²={fit['r2']:.3f}"
    if fit["r2"] < USL_MIN_R2:
        return [
            f"- USL fit is poor (R² {fit['r2']:.2f} < {USL_MIN_R2:g}): its predicted peak is "
            f"not reliable, so none is given ({shape})."
        ]
    n_star = "none" if fit["n_star"] is None else f"{fit['n_star']:.1f}"
    return [f"- USL: {shape}, N*={n_star}."]
