"""``perfbench plan``: how many runs a side, and repeats per run, a change needs to be seen
at the noise of runs already made: flags → rules → ``api.plan`` → ``Needs.markdown()``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from perfbench import api
from perfbench.cli import rules as gate
from perfbench.cli.app import app
from perfbench.cli.output import errors
from perfbench.errors import GateError
from perfbench.stats import power
from perfbench.stats.thresholds import quantity


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
        rules = gate.configured(config_file, gate=[metrics] if metrics else None, alpha=alpha)
        needs = api.plan(run_refs, effect, rules=rules, chance=chance, root=root)
    sys.stdout.write(needs.markdown())
