"""``perfbench run`` and ``sweep``: flags → spec → ``perfbench.api`` → exit code."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from perfbench import api
from perfbench.cli import options
from perfbench.cli.app import ExitCode, app
from perfbench.cli.options import OUTPUT, PASSES, TARGET, CasesArg, Flags, shared
from perfbench.cli.output import err, errors, out, print_result
from perfbench.engine.results import RunResult, SweepResult
from perfbench.errors import GateError
from perfbench.events import JsonEvents, LiveView, Progress, Sink
from perfbench.report.format import seconds
from perfbench.report.sweep_md import markdown as sweep_markdown
from perfbench.spec import Plan, RunSpec, SweepPlan, SweepSpec
from perfbench.stats.advice import client_bound
from perfbench.stats.knee import Level, StopRule
from perfbench.stats.thresholds import parse_slo

MAX_ERROR_RATE = 0.5  # a run where most tasks failed measured the failures, not the target


@app.command()
@shared(TARGET, PASSES, OUTPUT)
def run(
    ctx: typer.Context,
    cases: CasesArg = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency", "-c", rich_help_panel="Load", min=1, help="Tasks in flight at once."
        ),
    ] = 1,
    rate: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Load",
            min=0.001,
            help="Open loop: start tasks at this rate (tasks/s) whatever is "
            "in flight; latency is also reported from each task's intended start.",
        ),
    ] = None,
    arrival: Annotated[
        str,
        typer.Option(
            rich_help_panel="Load", help="Open-loop arrivals: constant or poisson (seeded)."
        ),
    ] = "constant",
    duration: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Load",
            min=0.001,
            help="Open loop: seconds per run (default: one pass over the suite × --repeat).",
        ),
    ] = None,
    max_in_flight: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Load",
            min=1,
            help="Open loop: tasks beyond this many in flight are dropped and "
            "counted, never silently delayed.",
        ),
    ] = None,
    adaptive: Annotated[
        bool,
        typer.Option(
            rich_help_panel="Load",
            help="Adaptive concurrency: AIMD on 429s (slow start, ×--decrease).",
        ),
    ] = False,
    max_concurrency: Annotated[
        int, typer.Option(rich_help_panel="Load", min=1, help="Adaptive: upper bound of the limit.")
    ] = 256,
    start: Annotated[
        int, typer.Option(rich_help_panel="Load", min=1, help="Adaptive: starting limit.")
    ] = 1,
    decrease: Annotated[
        float,
        typer.Option(
            rich_help_panel="Load",
            min=0.1,
            max=0.99,
            help="Adaptive: factor applied per 429 episode.",
        ),
    ] = 0.8,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue an interrupted run directory: finished tasks are kept."),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            help="Exit 7 when the client may have set the pace (event-loop lag, CPU, or near "
            "the ceiling `perfbench calibrate` measured): for CI jobs that must not trust "
            "such figures."
        ),
    ] = False,
    max_error_rate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Exit 8 when more than this share of the measured tasks failed (errors, "
            "timeouts, 429s after retries): a run of failures is not a measurement. 1 turns "
            "the check off.",
        ),
    ] = MAX_ERROR_RATE,
    *,
    flags: Flags,
) -> None:
    """Run a case suite: warmup, then measured runs; print per-case statistics.

    Example: [bold]perfbench run cases/ --runs 5 --concurrency 4 --label v1.4.0[/]
    """
    options.check_resume(ctx, resume is not None)
    options.check_load(ctx, rate is not None, adaptive)
    watch = _Watch(_sinks(flags["quiet"], flags["as_json"]))
    try:
        with errors():
            if resume is not None:
                result = api.resume(resume, watch)
            else:
                shape = options.load_shape(
                    rate, arrival, duration, max_in_flight, adaptive, max_concurrency, start,
                    decrease,
                )  # fmt: skip
                plan = options.plan(flags, concurrency=concurrency, load=shape)
                result = api.run(_run_spec(cases, flags, plan), watch)
    except BaseException:
        watch.failed()
        raise
    code = _exit_code(result, strict, max_error_rate)
    watch.finished(result.meta["status"], code, str(result.run_dir) if result.run_dir else None)
    _report(result, code, err if flags["as_json"] else out)
    if code:
        raise typer.Exit(code)


def _run_spec(cases: list[Path] | None, flags: Flags, plan: Plan) -> RunSpec:
    if not cases:
        raise typer.BadParameter("give case files or folders (or --resume RUN_DIR)")
    return RunSpec.build(
        cases,
        options.target_spec(flags),
        plan,
        label=flags["label"],
        prices=flags["prices"],
        out=flags["out_dir"],
    )


def _stopped(by: str | None) -> ExitCode:
    return ExitCode.TERMINATED if by == "SIGTERM" else ExitCode.INTERRUPTED


def _exit_code(result: RunResult, strict: bool, max_error_rate: float) -> ExitCode:
    if result.interrupted:
        return _stopped(result.meta.get("stopped_by"))
    if error_rate(result) > max_error_rate:
        return ExitCode.ERRORS
    if strict and client_bound(result.summary):
        return ExitCode.CLIENT_BOUND
    return ExitCode.OK


def _report(result: RunResult, code: ExitCode, console: Console) -> None:
    print_result(result.summary, result.meta, console)
    console.print(f"Run directory: [bold]{result.run_dir}[/]", highlight=False)
    if code == ExitCode.ERRORS:
        console.print(
            f"[red]error:[/] {error_rate(result):.0%} of the measured tasks failed (more than "
            "--max-error-rate allows); the failures above say why. Exit 8",
            highlight=False,
        )
    if code == ExitCode.CLIENT_BOUND:
        console.print(
            "[red]--strict:[/] the client may have set the pace (warnings above); exit 7",
            highlight=False,
        )


def _sinks(quiet: bool, as_json: bool) -> list[Sink]:
    sinks: list[Sink] = [] if quiet else [LiveView(err)]
    if as_json:
        sinks.append(JsonEvents(sys.stdout.buffer))
    return sinks


class _Watch(Progress):
    """The run's progress for people and scripts; says so when the first Ctrl-C stops it."""

    began = False

    def started(self, meta: dict[str, Any]) -> None:
        self.began = True
        super().started(meta)

    def stopping(self) -> None:
        err.print("Interrupted: stopping; Ctrl-C again to abort at once.")

    def failed(self) -> None:
        """A run that started and then failed on perfbench's own error ends with an event."""
        if self.began:
            self.finished("failed", ExitCode.CONFIG, None)


class _SweepWatch(_Watch):
    """Each level's run in the live view; a line per level, and level events with --json."""

    def __init__(self, sinks: list[Sink], events: JsonEvents | None) -> None:
        super().__init__(sinks)
        self.events = events
        self.t0 = time.monotonic()

    def run_finished(self, result: RunResult) -> None:
        self.finished("level", 0, None)

    def level_finished(self, level: Level, reason: str | None, sweep_dir: Path) -> None:
        status = f"stop: {reason}" if reason else "ok"
        err.print(
            f"level {level.level:g}: {level.throughput:.2f} tasks/s, "
            f"P95 {seconds(level.p95)} · {status}",
            highlight=False,
        )
        if self.events is not None:
            self.events.run_id = sweep_dir.name
            self.events.emit(
                "level_finished",
                time.monotonic() - self.t0,
                level=level.level,
                throughput=level.throughput,
                p95_s=level.p95,
                error_rate=level.error_rate,
                throttle_rate=level.throttle_rate,
                stop_reason=reason,
            )


@app.command()
@shared(TARGET, PASSES, OUTPUT, defaults={"runs": 3})
def sweep(
    ctx: typer.Context,
    cases: CasesArg = None,
    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency", "-c", rich_help_panel="Levels", help="Levels, e.g. 1,2,4,8,16,32."
        ),
    ] = None,
    rates: Annotated[
        str | None,
        typer.Option(rich_help_panel="Levels", help="Open-loop levels in tasks/s, e.g. 1,2,5,10."),
    ] = None,
    auto: Annotated[
        bool,
        typer.Option(
            rich_help_panel="Levels",
            help="Double concurrency from 1 (the default when no levels given).",
        ),
    ] = False,
    max_level: Annotated[
        float,
        typer.Option(
            rich_help_panel="Levels", min=1, help="Auto mode (no levels given): stop doubling here."
        ),
    ] = 1024,
    slo: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="Levels", help="Report the largest level meeting it, e.g. 'p95<2s'."
        ),
    ] = None,
    error_budget: Annotated[
        float,
        typer.Option(
            rich_help_panel="Levels",
            min=0,
            max=1,
            help="Stop when errors or 429s exceed this share.",
        ),
    ] = 0.01,
    p95_factor: Annotated[
        float,
        typer.Option(
            rich_help_panel="Levels", min=1, help="Stop when P95 exceeds this × the lowest level's."
        ),
    ] = 3.0,
    min_gain: Annotated[
        float,
        typer.Option(
            rich_help_panel="Levels",
            min=0,
            help="Stop when doubling gains less throughput than this.",
        ),
    ] = 0.10,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue an interrupted sweep directory: finished levels are kept."),
    ] = None,
    *,
    flags: Flags,
) -> None:
    """Run the suite at a series of load levels and find where the target stops scaling.

    Without --concurrency or --rates, doubles concurrency from 1 until errors/429s pass the
    budget, P95 grows past --p95-factor, or throughput stops growing; then bisects between
    the last good and the first bad level.

    Example: [bold]perfbench sweep cases/ -t mock+http:rate-limited --runs 1[/]
    """
    options.check_resume(ctx, resume is not None)
    events = JsonEvents(sys.stdout.buffer) if flags["as_json"] else None
    watch = _SweepWatch([] if flags["quiet"] else [LiveView(err)], events)
    with errors():
        if resume is not None:
            result = api.resume_sweep(resume, watch)
        else:
            rule = StopRule(error_budget, p95_factor, min_gain)
            spec = _sweep_spec(cases, flags, concurrency, rates, auto, max_level, slo, rule)
            result = api.sweep(spec, watch)
    console = err if events else out
    plan = result.plan
    text = sweep_markdown(result.levels, result.findings, rates=plan.rates, slo=plan.slo)
    console.print(text, highlight=False, markup=False)
    console.print(f"Sweep directory: [bold]{result.path}[/]", highlight=False)
    code = _stopped(result.stopped_by) if result.interrupted else ExitCode.OK
    if events is not None:
        _sweep_finished(events, watch.t0, result, code)
    if code:
        console.print(f"Stopped: continue with [bold]perfbench sweep --resume {result.path}[/]")
        raise typer.Exit(code)


def _sweep_finished(events: JsonEvents, t0: float, result: SweepResult, code: int) -> None:
    events.emit(
        "run_finished",
        time.monotonic() - t0,
        status="interrupted" if result.interrupted else "completed",
        exit_code=code,
        levels=len(result.levels),
        knee=result.findings.get("knee"),
        run_dir=str(result.path),
    )


def _sweep_spec(
    cases: list[Path] | None,
    flags: Flags,
    concurrency: str | None,
    rates: str | None,
    auto: bool,
    max_level: float,
    slo: str | None,
    rule: StopRule,
) -> SweepSpec:
    levels = options.levels(concurrency, "--concurrency")
    rate_levels = options.levels(rates, "--rates")
    if levels and rate_levels:
        raise typer.BadParameter("give --concurrency or --rates, not both")
    if auto and (levels or rate_levels):
        raise typer.BadParameter("--auto finds its own levels: drop --concurrency/--rates")
    if not cases:
        raise typer.BadParameter("give case files or folders (or --resume SWEEP_DIR)")
    base = options.plan({**flags, "workers": "1"})
    plan = SweepPlan(
        base=base,
        levels=levels or rate_levels,
        rates=bool(rate_levels),
        max_level=max_level,
        rule=rule,
        slo=_slo(slo) if slo else None,
        workers=0 if flags["workers"] == "auto" else options.workers(flags["workers"], base),
    )
    return SweepSpec.of(_run_spec(cases, flags, base), plan)


def _slo(text: str) -> tuple[str, float]:
    try:
        return parse_slo(text)
    except GateError as exc:  # a mistyped flag: a usage error (exit 2), said before any run
        raise typer.BadParameter(str(exc)) from None


def error_rate(result: RunResult) -> float:
    """The share of the measured tasks that failed (0 when none ran)."""
    overall = result.summary.get("pooled", {}).get("overall", {})
    rate = overall.get("error_rate")
    return float(rate) if isinstance(rate, int | float) else 0.0
