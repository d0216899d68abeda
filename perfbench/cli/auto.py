"""``run --runs auto``: the wish from its flags, and the line that says what it settled on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from perfbench.cli import config
from perfbench.errors import GateError
from perfbench.report.format import TITLES
from perfbench.stats import planning
from perfbench.stats.gate import build_rules
from perfbench.stats.thresholds import quantity


def wanted(detect: str, max_runs: int) -> planning.Wanted:
    try:
        effect = quantity(detect, "--detect")
    except GateError as exc:
        raise typer.BadParameter(str(exc)) from None
    if not 0 < effect < 10:
        raise typer.BadParameter(f"--detect {detect}: a relative change such as 10% or 25%")
    settings = config.compare_settings(config.find(Path.cwd()))
    return planning.Wanted(effect, max_runs, build_rules(settings))


def line(doc: dict[str, Any]) -> str:
    """What `--runs auto` settled on, and what to do where it fell short."""
    runs, goal = doc["runs"], f"{100 * doc['detect']:g}%"
    lines = []
    if doc.get("metric") is None:
        lines.append(
            f"warning: --runs auto kept {runs} runs: no gated timing can be flagged for a "
            f"{goal} change (within each one's threshold, or without spread). To fix: ask a "
            "larger --detect, or lower the thresholds (--max-regression METRIC=X%)."
        )
    elif doc["reached"]:
        lines.append(
            f"--runs auto: {runs} runs, enough for compare to see a {goal} slowdown that moves "
            f"every timing ({_metric(doc['metric'])}, at a run-to-run CV of {_pct(doc['cv'])}, "
            f"needs {doc['needed']}); give the other side --runs {runs} too."
        )
    else:
        can = doc.get("detectable")
        seen = f"; these runs can see about {100 * can:.0f}%" if can else ""
        lines.append(
            f"warning: --runs auto stopped at --max-runs {runs}: a {goal} slowdown needs "
            f"{doc['needed']} runs ({_metric(doc['metric'])}, the cheapest timing, at CV "
            f"{_pct(doc['cv'])}){seen}. To fix: --max-runs {doc['needed']}, a higher --repeat, "
            "or a larger --detect."
        )
    hardest = doc.get("hardest")
    if hardest and hardest[0] != doc.get("metric") and hardest[1] > runs:
        lines.append(
            f"note: a {goal} change in {_metric(hardest[0])} alone needs {hardest[1]} runs "
            f"(`perfbench plan RUN --detect {goal}` says per metric)."
        )
    for item in doc.get("unreachable") or []:
        lines.append(
            f"warning: {_metric(item['metric'])} cannot show {goal} in any number of runs: its "
            f"run-to-run CV of {_pct(item['cv'])} puts the gate's noise bar above it. To fix: "
            "raise --repeat (more tasks a run lower the CV as 1/sqrt(tasks))."
        )
    return "\n".join(lines)


def _metric(name: str) -> str:
    return TITLES.get(name, name)


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{100 * value:.1f}%"
