"""``perfbench plan``: how many runs a side, and repeats per run, a change needs to be seen
at the noise of runs already made (the arithmetic is ``stats.power``'s)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from perfbench import config, store
from perfbench.cli.app import app
from perfbench.cli.output import errors
from perfbench.errors import GateError
from perfbench.report.format import TITLES, table
from perfbench.stats import early_stopping, planning, power
from perfbench.stats.compare import Rules
from perfbench.stats.gate import build_rules
from perfbench.stats.thresholds import quantity
from perfbench.store import sides


@app.command()
def plan(
    run_refs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN...",
            help="Runs whose noise to plan with: directories, names, labels or patterns "
            "('base-*'). Two or more runs each; A/A runs of the same code are best.",
        ),
    ],
    detect: Annotated[
        str, typer.Option("--detect", help="The relative change to catch, e.g. 10%.")
    ] = "10%",
    metrics: Annotated[
        str | None,
        typer.Option("--metric", help="Plan for these metrics (p95,mean); default: the gated."),
    ] = None,
    chance: Annotated[
        float,
        typer.Option("--power", min=0.5, max=0.99, help="Chance of catching the change."),
    ] = power.POWER,
    alpha: Annotated[
        float | None, typer.Option(help="The gate's significance level (default 0.05).")
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option("--config", help="Settings file (default: ./perfbench.toml or pyproject)."),
    ] = None,
    root: Annotated[Path, typer.Option("--root", help="Folder that holds run directories.")] = (
        Path("runs")
    ),
) -> None:
    """Say how many runs a side (--runs) and tasks per run (--repeat) `perfbench compare`
    needs to catch a change of --detect, at the run-to-run noise of the runs given.

    Per metric: the runs a side for the rank test to reach p < alpha / m (a change in that
    metric alone, with m gated metrics) with the chance --power, and the --repeat that brings
    the run-to-run CV under the gate's noise bar. The cheapest row is the plan for a slowdown
    that moves every metric; take a metric's own row to catch a change in it alone.

    Example: perfbench run cases/ --runs 5 --label aa1; perfbench run cases/ --runs 5
    --seed 2 --label aa2; perfbench plan aa1 aa2 --detect 10%
    """
    with errors():
        effect = quantity(detect, "--detect")
        if not 0 < effect < 10:
            raise GateError(f"--detect {detect}: a relative change such as 10% or 25%")
        settings = config.compare_settings(config_file or config.find(Path.cwd()))
        rules = build_rules(settings, gate=[metrics] if metrics else None, alpha=alpha)
        with store.reading(*run_refs):
            loaded = [sides.load_side(ref, root) for ref in run_refs]
    metas = [meta for meta, _ in loaded]
    runs = [summary["runs"] for _, summary in loaded]
    measured = planning.gated(rules, runs)
    repeat = _repeat(metas)
    gate = planning.gate(rules, measured, chance)
    needs = [power.need(m, effect, repeat, gate) for m in measured]
    tested = planning.tested(measured)
    sys.stdout.write(_text(needs, effect, chance, rules, tested, repeat, runs))


def _repeat(metas: Sequence[Any]) -> int:
    repeats = {int(((m.get("spec") or {}).get("plan") or {}).get("repeat") or 1) for m in metas}
    return min(repeats)


def _text(
    needs: Sequence[power.Need],
    effect: float,
    chance: float,
    rules: Rules,
    tested: int,
    repeat: int,
    runs: Sequence[Sequence[Any]],
) -> str:
    total = sum(len(side) for side in runs)
    head = [
        f"## perfbench plan: catch a {100 * effect:g}% change",
        "",
        f"Noise from {total} runs in {len(runs)} group(s) at --repeat {repeat}. Chance "
        f"{chance:g} at p < {rules.alpha:g}/{tested} (the correction's first step over "
        f"{tested} gated metrics that vary: a change in one metric alone), with a change "
        f"counted only beyond {rules.noise_k:g} run-to-run CVs.",
        "",
        table(
            ("Metric", "CV now", "--runs (a side)", "--repeat", "CV then", "Note"),
            (_cells(n) for n in needs),
            right=(1, 2, 3, 4),
        ),
    ]
    # Tokens and cost do not move with a slowdown, and a metric without spread tells nothing.
    reachable = [n for n in needs if n.plan is not None and n.cv and n.metric in planning.TIMINGS]
    if reachable:
        best = min(reachable, key=lambda n: (n.plan.cost if n.plan else 0, n.metric))
        assert best.plan is not None
        head += [
            "",
            f"Cheapest: `perfbench run SUITE --runs {best.plan.runs} --repeat "
            f"{best.plan.repeat}` on each side, for a change that moves "
            f"{TITLES.get(best.metric, best.metric)}.",
        ]
    head += [
        "",
        "The --repeat column assumes the runs differ by sampling (more tasks a run lower the "
        "CV as 1/sqrt(tasks), as on the mock); a run-to-run factor such as a noisy neighbour "
        "does not fall with --repeat, only with --runs. Plan again on runs made that way.",
        *_tail_claims(runs),
    ]
    return "\n".join(head) + "\n"


def _tail_claims(runs: Sequence[Sequence[Any]]) -> list[str]:
    """How many tasks a P90/P95/P99 claim needs by MLPerf's rules, beside what a side has."""
    have = min(sum(r["overall"].get("tasks") or 0 for r in side) for side in runs)
    rows = []
    for pct in early_stopping.TAILS:
        margin = early_stopping.MARGINS[pct]
        size = early_stopping.sample_size(pct, margin)
        rows.append(
            [
                f"P{pct:g}",
                f"{early_stopping.min_count(pct):,}",
                f"{size:,} (±{100 * margin:.2f}%)",
                f"{early_stopping.rounded(size):,}",
            ]
        )
    return [
        "",
        f"### Tail claims at {early_stopping.CONFIDENCE:.0%} confidence (MLPerf's rules)",
        "",
        f"A side of these runs has {have:,} tasks. The early-stopping estimate of a percentile "
        "(beside the raw one in `show`) exists from the first count; MLPerf's table sizes a "
        "run to pin the percentile within the margin (inference_rules.adoc).",
        "",
        table(
            ("Percentile", "fewest tasks", "tasks for the margin", "MLPerf's table"),
            rows,
            right=(1, 2, 3),
        ),
    ]


def _cells(need: power.Need) -> list[str]:
    name = TITLES.get(need.metric, need.metric)
    cv = "–" if need.cv is None else f"{100 * need.cv:.1f}%"
    if need.plan is None:
        return [name, cv, "–", "–", "–", need.note]
    plan_ = need.plan
    return [name, cv, str(plan_.runs), str(plan_.repeat), f"{100 * plan_.cv:.1f}%", need.note]
