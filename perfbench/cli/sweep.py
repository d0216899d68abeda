"""``perfbench sweep``: flags → sweep spec → ``perfbench.api`` → findings and exit code."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from perfbench import api, store
from perfbench.cli import options, watching
from perfbench.cli.app import ExitCode, app
from perfbench.cli.events import JsonEvents, LiveView, Sink
from perfbench.cli.options import (
    OUTPUT,
    PASSES,
    SERVER,
    TARGET,
    WORKLOAD,
    CasesArg,
    Flags,
    shared,
)
from perfbench.cli.output import err, errors, out, print_result
from perfbench.cli.run import ABORTED_BY, MAX_ERROR_RATE, Watch, stopped
from perfbench.cli.specs import run_spec, server_options
from perfbench.engine.results import RunResult, SweepResult
from perfbench.errors import GateError
from perfbench.report import sweep_md
from perfbench.report.format import seconds
from perfbench.spec import SweepPlan, SweepSpec
from perfbench.stats import goodput
from perfbench.stats.abort import AbortOn
from perfbench.stats.knee import Level, StopRule
from perfbench.stats.thresholds import parse_slo
from perfbench.store import sides
from perfbench.store.sweeps import level_dir

# A percentile limit ('p95<2s', 'mean<1s') rather than goodput objectives.
_PERCENTILE = re.compile(r"^\s*(?:p\d+|mean)\s*<")


class _SweepWatch(Watch):
    """Each level's run in the live view; a line per level, and level events with --json."""

    def __init__(
        self, sinks: list[Sink], events: JsonEvents | None, abort: AbortOn | None = None
    ) -> None:
        super().__init__(sinks, abort=abort)
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
                success_rate=level.success_rate,
                throttle_rate=level.throttle_rate,
                stop_reason=reason,
            )


LevelsOpt = Annotated[
    str | None,
    typer.Option(
        "--concurrency", "-c", rich_help_panel="Levels", help="Levels, e.g. 1,2,4,8,16,32."
    ),
]
RatesOpt = Annotated[
    str | None,
    typer.Option(rich_help_panel="Levels", help="Open-loop levels in tasks/s, e.g. 1,2,5,10."),
]
AutoOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Levels",
        help="Double concurrency from 1 (the default when no levels given).",
    ),
]
MaxLevelOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Levels", min=1, help="Auto mode (no levels given): stop doubling here."
    ),
]
SloOpt = Annotated[
    str | None,
    typer.Option(
        rich_help_panel="Levels",
        help="Report the largest level meeting it: goodput objectives as run --slo takes "
        "them, 'ttft<500ms,tpot<50ms' (met by --attainment of the tasks), or a percentile "
        "of task latency, 'p95<2s'.",
    ),
]
AttainmentOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Levels",
        min=0.01,
        max=1,
        help="With goodput objectives in --slo: the share of tasks that must meet every "
        "one at a level (a failed task misses).",
    ),
]
ErrorBudgetOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Levels",
        min=0,
        max=1,
        help="Stop when errors or 429s exceed this share.",
    ),
]
P95FactorOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Levels", min=1, help="Stop when P95 exceeds this × the lowest level's."
    ),
]
MinGainOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Levels",
        min=0,
        help="Stop when doubling gains less throughput than this.",
    ),
]
ResumeOpt = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel="Passes",
        help="Continue an interrupted sweep directory: finished levels are kept.",
    ),
]
MaxErrorRateOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Exit code",
        min=0.0,
        max=1.0,
        help="Exit 8 when more than this share of the lowest level's tasks failed: the "
        "sweep measured failures, not where the target stops scaling. 1 turns it off.",
    ),
]


StagesOpt = Annotated[
    str | None,
    typer.Option(hidden=True, help="Refused: a sweep's levels each hold one load (run's)."),
]


@app.command()
@shared(TARGET, PASSES, WORKLOAD, OUTPUT, SERVER, watching.WATCHING, defaults={"runs": 3})
def sweep(
    ctx: typer.Context,
    cases: CasesArg = None,
    concurrency: LevelsOpt = None,
    rates: RatesOpt = None,
    auto: AutoOpt = False,
    max_level: MaxLevelOpt = 1024,
    slo: SloOpt = None,
    attainment: AttainmentOpt = 0.9,
    error_budget: ErrorBudgetOpt = 0.01,
    p95_factor: P95FactorOpt = 3.0,
    min_gain: MinGainOpt = 0.10,
    resume: ResumeOpt = None,
    max_error_rate: MaxErrorRateOpt = MAX_ERROR_RATE,
    stages: StagesOpt = None,
    *,
    flags: Flags,
) -> None:
    """Run the suite at a series of load levels and find where the target stops scaling.

    Without --concurrency or --rates, doubles concurrency from 1 until errors/429s pass the
    budget, P95 grows past --p95-factor, or throughput stops growing; then bisects between
    the last good and the first bad level.

    Example: [bold]perfbench sweep cases/ -t mock+http:rate-limit-knee --runs 1[/] (a mock
    provider limited to 30 requests/s: the sweep names the rate-limit knee, at 6–7 in flight)
    """
    options.check_resume(ctx, resume is not None)
    if stages is not None:
        raise typer.BadParameter(STAGES_REFUSED, param_hint="'--stages'")
    events = JsonEvents(sys.stdout.buffer) if flags["as_json"] else None
    with errors():
        shown = watching.shown(flags)
    with errors(), watching.served(shown.metrics_port, every_run=True) as page:
        live: list[Sink] = [] if flags["quiet"] else [LiveView(err)]
        watch = _SweepWatch([*live, *page], events, shown.abort)
        if resume is not None:
            result = api.resume_sweep(resume, watch)
        else:
            rule = StopRule(error_budget, p95_factor, min_gain)
            spec = _sweep_spec(
                cases, flags, concurrency, rates, auto, max_level, _slo(slo, attainment), rule
            )
            result = api.sweep(spec, watch)
    console = err if events else out
    if shown.details:
        with errors():
            _level_tables(result, console)
    console.print(sweep_md.render(result), highlight=False, markup=False)
    console.print(f"Sweep directory: [bold]{result.path}[/]", highlight=False)
    code = _ended(result, console)
    lowest = result.levels[0] if result.levels else None
    if not code and lowest is not None and lowest.error_rate > max_error_rate:
        code = ExitCode.ERRORS
        console.print(
            f"error: {lowest.error_rate:.0%} of the tasks at the lowest level ({lowest.level:g}) "
            f"failed, above --max-error-rate {max_error_rate:g}: check the target (see the "
            "failures above), or start lower (--rates for an open loop below 1 in flight).",
            highlight=False,
            soft_wrap=True,  # one line, for the scripts that read it
        )
    if events is not None:
        _sweep_finished(events, watch.t0, result, code)
    if code and result.interrupted:
        console.print(f"Stopped: continue with [bold]perfbench sweep --resume {result.path}[/]")
    if code:
        raise typer.Exit(code)


STAGES_REFUSED = (
    "--stages is for run: each level of a sweep holds one load for its whole run; give the "
    "levels with --concurrency or --rates (or none: the sweep doubles concurrency itself)"
)


def _ended(result: SweepResult, console: Console) -> ExitCode:
    """How the sweep ended: completed, stopped by a signal, or cut short by a level's
    --abort-on limit, which it says (exit 9; the levels measured before it are kept)."""
    if not result.interrupted:
        return ExitCode.OK
    by = result.stopped_by or ""
    if not by.startswith(ABORTED_BY):
        return stopped(by)
    level = "a level" if result.stopped_at is None else f"level {result.stopped_at:g}"
    console.print(
        f"[red]aborted[/] at {level} by --{by}; the levels before it are kept. Exit 9",
        highlight=False,
        soft_wrap=True,  # one line, for the scripts that read it
    )
    return ExitCode.ABORTED


def _level_tables(result: SweepResult, console: Console) -> None:
    """--details: every table of each level's run (what `perfbench show --details` prints of
    it), before the sweep's own table; the level cut short too, as far as it went."""
    for level in _level_dirs(result):
        run_dir, meta, summary = sides.load_run(str(level), result.path.parent)
        console.rule(f"{run_dir.name}", style="dim")
        with store.reading(run_dir):
            print_result(summary, meta, console, details=True, run_dir=run_dir)


def _level_dirs(result: SweepResult) -> list[Path]:
    levels = [v.level for v in result.levels]
    if result.stopped_at is not None:
        levels.append(result.stopped_at)
    found = [level_dir(result.path, level) for level in sorted(levels)]
    return [d for d in found if (d / store.META).is_file()]


def _sweep_finished(events: JsonEvents, t0: float, result: SweepResult, code: int) -> None:
    events.emit(
        "run_finished",
        time.monotonic() - t0,
        status="interrupted" if result.interrupted else "completed",
        exit_code=code,
        levels=len(result.levels),
        knee=result.findings.get("knee"),
        knee_kind=result.findings.get("knee_kind"),
        run_dir=str(result.path),
    )


def _sweep_spec(
    cases: list[Path] | None,
    flags: Flags,
    concurrency: str | None,
    rates: str | None,
    auto: bool,
    max_level: float,
    slo: tuple[str, float] | None,
    rule: StopRule,
) -> SweepSpec:
    levels = options.levels(concurrency, "--concurrency")
    rate_levels = options.levels(rates, "--rates")
    if levels and rate_levels:
        raise typer.BadParameter("give --concurrency or --rates, not both")
    if auto and (levels or rate_levels):
        raise typer.BadParameter("--auto finds its own levels: drop --concurrency/--rates")
    if not cases and flags["synthetic"] is None:
        raise typer.BadParameter("give case files or folders, --synthetic, or --resume SWEEP_DIR")
    if flags["runs"] == "auto":
        raise typer.BadParameter("--runs auto is for run: give a sweep's levels a number of runs")
    if flags["record"]:
        raise typer.BadParameter("--record is for run: a sweep's levels would each write it")
    base = options.plan({**flags, "workers": "1"})
    plan = SweepPlan(
        base=base,
        levels=levels or rate_levels,
        rates=bool(rate_levels),
        max_level=max_level,
        rule=rule,
        slo=slo,
        workers=0 if flags["workers"] == "auto" else options.workers(flags["workers"], base),
    )
    return SweepSpec.of(run_spec(cases, flags, base, **server_options(flags)), plan)


def _slo(text: str | None, attainment: float) -> tuple[str, float] | None:
    """The sweep's objective: a percentile limit, ('p95', 2.0), or goodput objectives with
    the share of tasks that must meet them, ('ttft<500ms,tpot<50ms', 0.9)."""
    if not text:
        return None
    try:
        if _PERCENTILE.match(text):
            return parse_slo(text)
        return goodput.parse(text).text, attainment
    except GateError as exc:  # a mistyped flag: a usage error (exit 2), said before any run
        raise typer.BadParameter(str(exc)) from None
