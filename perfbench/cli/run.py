"""``perfbench run`` and ``sweep``: flags → spec → ``perfbench.api`` → exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from perfbench import api
from perfbench.cli import auto, config, options, otlp, shape, watching
from perfbench.cli.app import ExitCode, app
from perfbench.cli.events import JsonEvents, LiveView, Progress, Sink
from perfbench.cli.options import (
    AUTO_FIRST_RUNS,
    OUTPUT,
    PASSES,
    SERVER,
    TARGET,
    WORKLOAD,
    CasesArg,
    Flags,
    shared,
)
from perfbench.cli.output import err, errors, out, print_result, run_directory
from perfbench.cli.specs import objectives, run_spec, scenario_flags, server_options, trace_cases
from perfbench.engine.results import RunResult
from perfbench.report.format import seconds
from perfbench.spec import Plan, RunSpec
from perfbench.stats.advice import client_bound

MAX_ERROR_RATE = 0.5  # a run where most tasks failed measured the failures, not the target


ResumeOpt = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel="Passes",
        help="Continue an interrupted run directory: finished tasks are kept (a --rate, "
        "--duration or --stages pass cut short runs again whole).",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Exit code",
        help="Exit 7 when the client may have set the pace (event-loop lag, CPU, or near "
        "the ceiling `perfbench calibrate` measured): for CI jobs that must not trust "
        "such figures.",
    ),
]
MaxErrorRateOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Exit code",
        min=0.0,
        max=1.0,
        help="Exit 8 when more than this share of the measured tasks failed (errors, "
        "timeouts, 429s after retries): a run of failures is not a measurement. 1 turns "
        "the check off.",
    ),
]
DetectOpt = Annotated[
    str,
    typer.Option(
        rich_help_panel="Passes",
        help="With --runs auto: the change compare must be able to see (20%: a P95 20% "
        "slower), at the noise these runs measure; timings whose threshold is at or above "
        "it are not counted (compare never flags them for such a change).",
    ),
]
MaxRunsOpt = Annotated[
    int,
    typer.Option(
        rich_help_panel="Passes",
        min=AUTO_FIRST_RUNS,
        help="With --runs auto: the most runs to make; past it the run says what it can "
        "detect instead.",
    ),
]
SloOpt = Annotated[
    str | None,
    typer.Option(
        rich_help_panel="Output",
        help="Service-level objectives for goodput: 'ttft<500ms,tpot<50ms' (also e2e, per "
        "request, and latency, per task). The run reports the share and rate of requests "
        "and tasks meeting every one; failed and refused ones count as misses.",
    ),
]
ScenarioOpt = Annotated[
    str | None,
    typer.Option(
        rich_help_panel="Output",
        help="Stamp the run VALID or INVALID by a scenario's rules: mlperf-server (Poisson "
        "arrivals at --rate, 600 s and 1 run by default, at least 100 queries, the --slo "
        "preset met at P99 with its early-stopping estimate). Each failed rule is named.",
    ),
]


@app.command()
@shared(TARGET, PASSES, WORKLOAD, OUTPUT, SERVER, watching.WATCHING)
def run(
    ctx: typer.Context,
    cases: CasesArg = None,
    concurrency: shape.ConcurrencyOpt = 1,
    rate: shape.RateOpt = None,
    arrival: shape.ArrivalOpt = "constant",
    duration: shape.DurationOpt = None,
    trace: shape.TraceOpt = None,
    max_in_flight: shape.MaxInFlightOpt = None,
    adaptive: shape.AdaptiveOpt = False,
    max_concurrency: shape.MaxConcurrencyOpt = 256,
    start: shape.StartOpt = 1,
    decrease: shape.DecreaseOpt = 0.8,
    stages: shape.StagesOpt = None,
    resume: ResumeOpt = None,
    strict: StrictOpt = False,
    max_error_rate: MaxErrorRateOpt = MAX_ERROR_RATE,
    detect: DetectOpt = "20%",
    max_runs: MaxRunsOpt = 20,
    slo: SloOpt = None,
    otlp_url: otlp.OtlpOpt = None,
    scenario: ScenarioOpt = None,
    *,
    flags: Flags,
) -> None:
    """Run a case suite: warmup, then measured runs; print per-case statistics.

    Example: [bold]perfbench run cases/ --runs 5 --concurrency 4 --label v1.4.0[/]

    [bold]--runs auto[/] makes 5 runs, then adds runs (one more warmup pass first, each
    time) until the runs' own noise lets `perfbench compare` see a slowdown of --detect with
    a chance of 0.9, or --max-runs is reached; give the other side of a comparison as many.

    [bold]-t A -t B[/]: one run per target, the same cases and plan, one after the other;
    then a report comparing them (the first is the baseline) in --out/targets-<time>/.
    """
    options.check_resume(ctx, resume is not None)
    options.check_load(ctx, rate is not None or trace is not None, adaptive)
    console = err if flags["as_json"] else out
    if resume is not None:
        code, _ = _one(lambda w: api.resume(resume, w), flags, strict, max_error_rate, otlp_url)
        raise typer.Exit(code)
    if scenario is not None:
        arrival, duration, flags = scenario_flags(ctx, flags, scenario, rate, arrival,
                                                  duration, slo)  # fmt: skip
    with errors():
        shape = options.load_shape(
            rate, arrival, duration, max_in_flight, adaptive, max_concurrency, start, decrease,
            trace,
        )  # fmt: skip
        flags, stages = _staged(ctx, flags, stages)
        plan = options.plan(
            flags, concurrency=concurrency, load=shape, duration=duration, stages=stages
        )
        wanted = auto.wanted(detect, max_runs) if flags["runs"] == "auto" else None
        extra = {"slo": objectives(slo), "scenario": scenario, **server_options(flags)}
        sources = trace_cases(cases, flags, trace)
        specs = [run_spec(sources, flags, plan, t, **extra) for t in options.target_specs(flags)]
        for later in specs[1:]:  # the first is checked as its run starts
            api.check(later)
    codes, results = [], []
    for spec in specs:

        def measure(watch: Watch, spec: RunSpec = spec) -> RunResult:
            result = api.run(spec, watch)
            return api.more_runs(result, wanted, watch) if wanted is not None else result

        code, result = _one(measure, flags, strict, max_error_rate, otlp_url)
        codes.append(code)
        results.append(result)
        if result.interrupted:
            break
    if len(specs) > 1 and len(results) == len(specs):
        with errors():
            _targets_report(results, plan, console)
    raise typer.Exit(_worst(codes))


def _staged(ctx: typer.Context, flags: Flags, stages: str | None) -> tuple[Flags, str | None]:
    """The stages the run follows (``options.staged``'s defaults with them): --stages, else
    perfbench.toml's."""
    stages = _file_stages(ctx, stages)
    return options.staged(ctx, flags, stages), stages


def _file_stages(ctx: typer.Context, stages: str | None) -> str | None:
    """--stages, else perfbench.toml's ``[run] stages`` unless the command line gives the load
    another way (-c, --rate, --adaptive, --duration, --trace, --scenario): it wins."""
    if stages is not None or options.flag_names(options.given(ctx), _ELSEWHERE):
        return stages
    path = config.find(Path.cwd())
    found = config.run_stages(path)
    if found is not None and path is not None:  # said, as the file is not on the line
        line = f"load: the stages of {path.name} ([run] stages): {found}"
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    return found


_ELSEWHERE = {*options.NOT_STAGED, "scenario"}


def _one(
    measure: Callable[[Watch], RunResult],
    flags: Flags,
    strict: bool,
    max_error_rate: float,
    otlp_url: str | None = None,
) -> tuple[ExitCode, RunResult]:
    """One run, its progress shown and its tables printed, and (--otlp) sent; its exit code."""
    with errors():
        otlp.check(otlp_url)
        shown = watching.shown(flags)
    chosen = sinks(flags["quiet"], flags["as_json"])
    with errors(), watching.served(shown.metrics_port) as page:
        watch = Watch([*chosen, *page], abort=shown.abort)
        try:
            result = measure(watch)
        except BaseException:
            watch.failed()
            raise
    code = _exit_code(result, strict, max_error_rate)
    watch.finished(result.meta["status"], code, str(result.run_dir) if result.run_dir else None)
    _report(result, code, err if flags["as_json"] else out, shown.details)
    _send(result, otlp_url)
    return code, result


def _send(result: RunResult, url: str | None) -> None:
    """--otlp: the run's tasks as spans, after it (an interrupted run's finished ones too)."""
    if url is not None and result.run_dir is not None:
        with errors():
            otlp.send(result.run_dir, dict(result.meta), url)


def _worst(codes: list[ExitCode]) -> ExitCode:
    """An interruption first (the user stopped it), then the first failure, else OK."""
    for code in codes:
        if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
            return code
    return next((c for c in codes if c), ExitCode.OK)


def _targets_report(results: list[RunResult], plan: Plan, console: Console) -> None:
    """The targets side by side: a line each, and a report with the first as the baseline."""
    from perfbench.report import release

    dirs = [r.run_dir for r in results if r.run_dir is not None]
    if len(dirs) != len(results):
        return  # a run kept in memory only (no --out): nothing to report from
    console.print("\nTargets, the same cases and plan:", highlight=False)
    for result in results:
        line = result.meta.get("headline") or {}
        console.print(
            f"  {result.meta['target']}: P50 {seconds(line.get('p50'))}, P95 "
            f"{seconds(line.get('p95'))}, {line.get('throughput') or 0:.2f} tasks/s, "
            f"{line.get('ok', 0)}/{line.get('tasks', 0)} ok",
            highlight=False,
            markup=False,
            emoji=False,  # a target is the user's text: "mock:zero" is not an emoji
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = dirs[0].parent / f"targets-{stamp}"
    runs = [release.load(str(d), d.parent) for d in dirs]
    path = release.build(runs, runs[0], folder)
    console.print(f"Report comparing them: {path}", highlight=False, markup=False, emoji=False)


ABORTED_BY = "abort-on: "  # stopped_by of a run an --abort-on limit stopped (events.Progress)


def stopped(by: str | None) -> ExitCode:
    return ExitCode.TERMINATED if by == "SIGTERM" else ExitCode.INTERRUPTED


def _exit_code(result: RunResult, strict: bool, max_error_rate: float) -> ExitCode:
    if result.interrupted:
        by = result.meta.get("stopped_by") or ""
        return ExitCode.ABORTED if by.startswith(ABORTED_BY) else stopped(by)
    if error_rate(result) > max_error_rate:
        return ExitCode.ERRORS
    if strict and client_bound(result.summary):
        return ExitCode.CLIENT_BOUND
    return ExitCode.OK


def _report(result: RunResult, code: ExitCode, console: Console, details: bool) -> None:
    footer: list[RenderableType] = []
    if "runs_auto" in result.meta:
        footer.append(auto.line(result.meta["runs_auto"]))
    footer.append(run_directory(result.run_dir, details))
    if result.interrupted and result.run_dir is not None:  # a command to copy: never broken
        again = f"Stopped: continue with perfbench run --resume {result.run_dir}"
        footer.append(Text(again, no_wrap=True, overflow="ignore"))
    if code == ExitCode.ABORTED:
        footer.append(
            f"[red]aborted[/] by --{result.meta['stopped_by']}; what was measured is kept. Exit 9"
        )
    if code == ExitCode.ERRORS:
        footer.append(
            f"[red]error:[/] {error_rate(result):.0%} of the measured tasks failed (more than "
            "--max-error-rate allows); the failures above say why. Exit 8"
        )
    if code == ExitCode.CLIENT_BOUND:
        footer.append(
            "[red]--strict:[/] the client may have set the pace (see the warnings); exit 7"
        )
    print_result(result.summary, result.meta, console, details, footer)


def sinks(quiet: bool, as_json: bool) -> list[Sink]:
    sinks: list[Sink] = [] if quiet else [LiveView(err)]
    if as_json:
        sinks.append(JsonEvents(sys.stdout.buffer))
    return sinks


class Watch(Progress):
    """The run's progress for people and scripts; says so when the first Ctrl-C stops it."""

    began = False

    def started(self, meta: dict[str, Any]) -> None:
        self.began = True
        super().started(meta)

    def resuming(self, note: str) -> None:
        err.print(note, highlight=False, markup=False, soft_wrap=True)  # one line to read

    def stopping(self) -> None:
        err.print(
            "Interrupted: stopping; Ctrl-C again to stop waiting for the tasks in flight "
            "(the run directory is still finalised)."
        )

    def failed(self) -> None:
        """A run that started and then failed on perfbench's own error ends with an event."""
        if self.began:
            self.finished("failed", ExitCode.CONFIG, None)


def error_rate(result: RunResult) -> float:
    """The share of the measured tasks that failed (0 when none ran)."""
    overall = result.summary.get("pooled", {}).get("overall", {})
    rate = overall.get("error_rate")
    return float(rate) if isinstance(rate, int | float) else 0.0
