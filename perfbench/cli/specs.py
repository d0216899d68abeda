"""The run spec from the command line: which cases (files, --synthetic, a shaped --trace),
the target, the plan and the run's own options, each checked as a usage error (exit 2) before
anything runs. `run` and `sweep` build their specs here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from perfbench.cli import options
from perfbench.cli.options import Flags
from perfbench.cli.output import warning
from perfbench.errors import GateError, TargetError
from perfbench.http.urls import checked_url
from perfbench.load import trace as trace_file
from perfbench.sources import trace as trace_shapes
from perfbench.spec import SYNTHETIC, TRACE, Plan, RunSpec, TargetSpec
from perfbench.stats import goodput
from perfbench.store.cases import CASES
from perfbench.store.files import META, SAMPLES, SERVER_METRICS, SUMMARY

RUN_DOCUMENTS = (META, SAMPLES, SUMMARY, CASES, SERVER_METRICS)  # what a run directory holds


def objectives(text: str | None) -> str | None:
    """--slo, checked now (a usage error, exit 2), recorded as given."""
    if text is None:
        return None
    try:
        return goodput.parse(text).text
    except GateError as exc:
        raise typer.BadParameter(str(exc)) from None


def scenario_load(
    name: str, rate: float | None, arrival: str, duration: float | None, slo: str | None
) -> tuple[str, float]:
    """``--scenario``'s load (its arrivals, and its minimum duration unless --duration says
    otherwise), checked now: a usage error (exit 2) names what the scenario needs."""
    from perfbench.stats.scenario import SCENARIOS

    found = SCENARIOS.get(name)
    if found is None:
        raise typer.BadParameter(f"--scenario {name}: known: {', '.join(SCENARIOS)}")
    if rate is None:
        raise typer.BadParameter(
            f"--scenario {name} sends {found.arrival} arrivals: give their rate, --rate R "
            "(sweep --rates R1,R2 --slo PRESET finds the largest one that meets it)"
        )
    if arrival != "constant" and arrival != found.arrival:
        raise typer.BadParameter(f"--scenario {name} sends {found.arrival} arrivals")
    if slo is None or not goodput.parse(objectives(slo) or slo).percentile:
        raise typer.BadParameter(
            f"--scenario {name} judges the run against an SLO preset: add --slo "
            "mlperf:MODEL:server (perfbench slo list)"
        )
    return found.arrival, found.min_duration_s if duration is None else duration


def server_options(flags: Flags) -> dict[str, Any]:
    """--server-metrics (checked now: a usage error, exit 2) and --scrape-interval."""
    url = flags["server_metrics"]
    try:
        checked = checked_url(url, "--server-metrics") if url else None
    except TargetError as exc:
        raise typer.BadParameter(str(exc)) from None
    return {"server_metrics": checked, "scrape_interval": flags["scrape_interval"]}


def trace_cases(
    cases: list[Path] | None, flags: Flags, trace: Path | None
) -> list[Path | str] | None:
    """--trace with no cases: the trace's lines shape the requests (one case per arrival);
    with cases, a trace's lengths are not used, and that is said."""
    if trace is None:
        return list(cases) if cases else None
    if not cases and flags["synthetic"] is None:
        return [TRACE + str(trace)]
    if trace_shapes.shaped(trace_file.arrivals(trace)):
        warning(
            f"{trace} gives each request's length, which is not used when cases are given: "
            "the cases run at its arrival times. Drop the cases to replay its shapes too."
        )
    return list(cases) if cases else None


def checked_recording(path: Path, sources: Sequence[Path | str], force: bool) -> None:
    """--record FILE: never a file the run reads or writes (a case file, a run's documents),
    and an existing file only with --force."""
    path = path.resolve()
    given = [Path(s).resolve() for s in sources if not str(s).startswith((SYNTHETIC, TRACE))]
    in_a_folder = any(path.is_relative_to(g) for g in given if g.is_dir())
    if path in given or (in_a_folder and path.suffix in (".yaml", ".yml")):
        raise typer.BadParameter(f"--record {path}: that is a case file of this run; "
                                 "write the recording elsewhere")  # fmt: skip
    if path.name in RUN_DOCUMENTS or (path.parent / META).exists():
        raise typer.BadParameter(f"--record {path}: that is in a run directory; write the "
                                 "recording elsewhere (recordings/agent.jsonl)")  # fmt: skip
    if path.exists() and not force:
        raise typer.BadParameter(f"--record {path} exists: give another file, or add --force "
                                 "to overwrite it")  # fmt: skip


def run_spec(
    cases: Sequence[Path | str] | None,
    flags: Flags,
    plan: Plan,
    target: TargetSpec | None = None,
    **more: Any,
) -> RunSpec:
    sources: list[Path | str] = list(cases or [])
    if flags["synthetic"] is not None:
        if sources:
            raise typer.BadParameter("give case files or --synthetic, not both")
        sources = [SYNTHETIC + flags["synthetic"]]
    if not sources:
        raise typer.BadParameter(
            "give case files or folders, --synthetic SPEC, or a --trace with input_length"
        )
    target = target if target is not None else options.target_spec(flags)
    if target.record and plan.workers != 1:
        raise typer.BadParameter("--record writes one file from one process: add --workers 1")
    if target.record:
        checked_recording(Path(target.record), sources, flags["force"])
    return RunSpec.build(
        sources,
        target,
        plan,
        label=flags["label"],
        prices=flags["prices"],
        out=flags["out_dir"],
        **more,  # slo, server_metrics, scrape_interval
    )


def scenario_flags(
    ctx: typer.Context,
    flags: Flags,
    scenario: str,
    rate: float | None,
    arrival: str,
    duration: float | None,
    slo: str | None,
) -> tuple[str, float | None, Flags]:
    """--scenario's arrivals and duration, and its one run unless --runs was given."""
    arrival, duration = scenario_load(scenario, rate, arrival, duration, slo)
    if not any(p.name == "runs" for p in options.given(ctx)):
        flags = {**flags, "runs": "1"}  # MLPerf's Server scenario is one run
    return arrival, duration, flags
