"""``perfbench plan``'s answer as Markdown (pure): per gated metric the runs a side and the
repeats a change needs at the noise measured, the cheapest plan, and the task counts a tail
claim needs by MLPerf's rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfbench.report.format import TITLES, table
from perfbench.stats import early_stopping, planning, power
from perfbench.stats.compare import Rules


def cheapest(needs: Sequence[power.Need]) -> power.Need | None:
    """The timing whose plan costs least: the plan for a slowdown that moves every metric.
    Tokens and cost do not move with a slowdown, and a metric without spread tells nothing."""
    reachable = [n for n in needs if n.plan is not None and n.cv and n.metric in planning.TIMINGS]
    return min(reachable, key=lambda n: (n.plan.cost if n.plan else 0, n.metric), default=None)


def text(
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
    best = cheapest(needs)
    if best is not None and best.plan is not None:
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
