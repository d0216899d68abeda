"""The ``perfbench`` command. Parses, calls the library, prints, and maps outcomes to exit codes;
it holds no measurement logic of its own."""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import anyio.abc
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from perfbench import __version__, config, host, store
from perfbench.engine.session import RunResult, Session
from perfbench.engine.sweep import Sweep
from perfbench.errors import GateError, PerfbenchError, StoreError
from perfbench.events import JsonEvents, LiveView, Progress, Sink
from perfbench.load import Adaptive, Load, Rate
from perfbench.report import compare_md
from perfbench.report import console as tables
from perfbench.report.format import seconds
from perfbench.report.junit import junit
from perfbench.report.sweep_md import markdown as sweep_markdown
from perfbench.spec import Plan, SweepPlan, auto_workers, plan_doc, plan_from_doc
from perfbench.stats.advice import advise, client_bound
from perfbench.stats.compare import BY_NAME, Comparison, compare
from perfbench.stats.cost import load_pricer
from perfbench.stats.gate import (
    Outcome,
    ThresholdResult,
    build_rules,
    check_thresholds,
    outcome,
    parse_threshold,
)
from perfbench.stats.knee import Level, StopRule
from perfbench.stats.summary import across_runs
from perfbench.store import sweeps
from perfbench.suite import load_suite
from perfbench.targets.registry import TargetOptions, resolve


class ExitCode(IntEnum):
    """Documented in the README; scripts and CI gates rely on these numbers."""

    OK = 0
    USAGE = 2  # bad command line (typer/click's own code)
    CONFIG = 3  # bad case file, profile, target or run directory; perfbench could not work
    REGRESSION = 4  # compare: the candidate is significantly worse on a gated metric
    THRESHOLD = 5  # compare: an absolute threshold (--threshold p95<2s) is breached
    INCONCLUSIVE = 6  # compare --strict: a big change that more runs must confirm
    CLIENT_BOUND = 7  # run --strict: perfbench itself may have set the pace (lag, CPU, ceiling)
    INTERRUPTED = 130  # stopped with Ctrl-C; what was measured is kept


app = typer.Typer(
    help="Measure the latency, throughput, tokens and cost of LLM agents and LLM APIs.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
cases_app = typer.Typer(help="Inspect and validate case suites.", no_args_is_help=True)
app.add_typer(cases_app, name="cases")
mock_app = typer.Typer(
    help="The mock agent server: OpenAI- and Anthropic-compatible HTTP on loopback.",
    no_args_is_help=True,
)
app.add_typer(mock_app, name="mock")


def _console(stderr: bool = False) -> Console:
    # Off a terminal (CI logs, pipes) rich assumes 80 columns and squeezes the tables; logs
    # can take wider lines. COLUMNS, when set, still wins.
    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=120)
    return console


out = _console()
err = _console(stderr=True)

CasesArg = Annotated[
    list[Path],
    typer.Argument(help="Case files or folders (searched recursively for *.yaml, *.yml)."),
]
RampUpOption = Annotated[
    str,
    typer.Option(
        help="Closed loop: seconds over which the concurrency's task slots start, evenly. "
        "auto: one slot per ms per worker process (0.256 s for -c 256 in one process), so "
        "completions do not all come back at once and queue in the client; 0: all at once, "
        "whose tasks then finish and restart in waves for the whole pass.",
    ),
]
OptionalCasesArg = Annotated[
    list[Path] | None,
    typer.Argument(help="Case files or folders (searched recursively for *.yaml, *.yml)."),
]
RootOpt = Annotated[Path, typer.Option("--root", help="Folder that holds run directories.")]


@contextmanager
def _errors() -> Iterator[None]:
    """perfbench's own failures end the command with a message, never a traceback."""
    try:
        yield
    except BaseExceptionGroup as group:  # raised inside a task group: unwrap ours
        ours, rest = group.split(PerfbenchError)
        if ours is None or rest is not None:
            raise
        first = _first_leaf(ours)
        err.print(
            Text.assemble(("error: ", "bold red"), str(first)), highlight=False, soft_wrap=True
        )
        raise typer.Exit(ExitCode.CONFIG) from None
    except PerfbenchError as exc:
        # As Text, not markup: messages quote user input such as '[a-z]' verbatim.
        # soft_wrap: a file:line: field: message line stays one line, whatever the width.
        err.print(Text.assemble(("error: ", "bold red"), str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.CONFIG) from None


def _first_leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _version(value: bool) -> None:
    if value:
        out.print(f"perfbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
) -> None:
    """Measure the latency, throughput, tokens and cost of LLM agents and LLM APIs.

    Start with [bold]perfbench run cases/[/]: it runs the example suite against the embedded
    mock agent (no API key) and leaves a run directory in runs/.
    """


@app.command()
def run(
    ctx: typer.Context,
    cases: OptionalCasesArg = None,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            "-t",
            help="What to measure: mock+http[:profile] (the mock server over HTTP, default), "
            "mock[:profile] (in-process), provider/model (openai, anthropic, deepseek, qwen, "
            "zhipu), http+agent://host/path, python:module:function.",
        ),
    ] = "mock+http",
    base_url: Annotated[
        str | None,
        typer.Option(
            help=(
                "Base URL of the server, as its SDK takes it: OpenAI-compatible with /v1 "
                "(http://127.0.0.1:8000/v1), Anthropic without (http://127.0.0.1:8000)."
            )
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the API key (keys never go on the command "
            "line, nor into run directories)."
        ),
    ] = None,
    stream: Annotated[
        bool, typer.Option("--stream/--no-stream", help="Stream replies (TTFT needs it).")
    ] = True,
    retries: Annotated[
        int, typer.Option(min=0, help="Retries of a 429/5xx answer, waiting as the server asks.")
    ] = 3,
    check_tokens: Annotated[
        bool,
        typer.Option(
            help="Also count output tokens offline when the API reports usage, to "
            "show the discrepancy (costs client CPU per call)."
        ),
    ] = False,
    runs: Annotated[
        int, typer.Option(min=1, help="Measured passes over the suite; statistics are per run.")
    ] = 5,
    warmup: Annotated[
        int, typer.Option(min=0, help="Warmup passes first; kept in samples.jsonl, not in stats.")
    ] = 1,
    repeat: Annotated[
        int, typer.Option(min=1, help="Executions of each case per pass (raise it for P99).")
    ] = 1,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Tasks in flight at once.")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Seed for every simulated draw.")] = 0,
    workers: Annotated[
        str,
        typer.Option(
            help="Processes sharing the load, each with its own event loop and clients: a "
            "number, or auto (one per 128 in flight or 1,000 tasks/s, at most one per core). "
            "Raise it when a run warns that the client was the bottleneck.",
        ),
    ] = "auto",
    ramp_up: RampUpOption = "auto",
    rate: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Open loop: start tasks at this rate (tasks/s) whatever is "
            "in flight; latency is also reported from each task's intended start.",
        ),
    ] = None,
    arrival: Annotated[
        str, typer.Option(help="Open-loop arrivals: constant or poisson (seeded).")
    ] = "constant",
    duration: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Open loop: seconds per run (default: one pass over the suite × --repeat).",
        ),
    ] = None,
    max_in_flight: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Open loop: tasks beyond this many in flight are dropped and "
            "counted, never silently delayed.",
        ),
    ] = None,
    adaptive: Annotated[
        bool, typer.Option(help="Adaptive concurrency: AIMD on 429s (slow start, ×--decrease).")
    ] = False,
    max_concurrency: Annotated[
        int, typer.Option(min=1, help="Adaptive: upper bound of the limit.")
    ] = 256,
    start: Annotated[int, typer.Option(min=1, help="Adaptive: starting limit.")] = 1,
    decrease: Annotated[
        float, typer.Option(min=0.1, max=0.99, help="Adaptive: factor applied per 429 episode.")
    ] = 0.8,
    label: Annotated[
        str | None, typer.Option(help="A release or build name, e.g. v1.4.0; used by compare.")
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder in which the run directory is created.")
    ] = Path("runs"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Events as JSON lines on stdout (run_started, phase_changed, task_finished, "
            "progress, run_finished; docs/events.md); the tables go to stderr.",
        ),
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option(help="Dated price overrides (YAML); default ./perfbench.prices.yaml if any."),
    ] = None,
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
) -> None:
    """Run a case suite: warmup, then measured runs; print per-case statistics.

    Example: [bold]perfbench run cases/ --runs 5 --concurrency 4 --label v1.4.0[/]
    """
    _check_given(ctx, resume is not None, rate is not None, adaptive)
    progress = _progress(quiet, as_json)
    with _errors():
        if resume is not None:
            session = _resumed_session(resume, progress)
        else:
            if not cases:
                raise typer.BadParameter("give case files or folders (or --resume RUN_DIR)")
            suite = load_suite(cases)
            shape = _load_shape(
                rate, arrival, duration, max_in_flight, adaptive, max_concurrency, start, decrease
            )
            options = TargetOptions(
                base_url=base_url,
                api_key_env=api_key_env,
                stream=stream,
                concurrency=Plan(concurrency=concurrency, load=shape).connections(),
                seed=seed,
                retries=retries,
                check_tokens=check_tokens,
            )
            plan = Plan(
                runs=runs,
                warmup=warmup,
                repeat=repeat,
                concurrency=concurrency,
                seed=seed,
                load=shape,
                ramp_up=_ramp(ramp_up),
            )
            plan = replace(plan, workers=_workers(workers, plan))
            session = Session(
                suite,
                resolve(target, options),
                plan,
                out_root=out_dir,
                label=label,
                on_pass=progress.phase,
                observers=progress.observers(),
                on_start=progress.started,
                pricer=load_pricer(prices),
                recipe=(target, options),
                invocation={
                    "cases": [str(p.resolve()) for p in cases],
                    "target": target,
                    "options": asdict(options),
                    "prices": str(prices.resolve()) if prices else None,
                },
            )
        progress.planned = session.planned_tasks()
        progress.limit = lambda: session.runner.aimd.limit if session.runner.aimd else None
        progress.in_flight = session.runner.tasks_in_flight
        try:
            result = anyio.run(_run_with_sigint, session, backend_options=host.loop_options())
        except BaseException:
            progress.finished("failed", ExitCode.CONFIG, None)
            raise
    code = ExitCode.INTERRUPTED if result.interrupted else ExitCode.OK
    if not code and strict and client_bound(result.summary):
        code = ExitCode.CLIENT_BOUND
    progress.finished(result.meta["status"], code, str(result.run_dir) if result.run_dir else None)
    console = err if as_json else out
    _print_result(result.summary, result.meta, console)
    console.print(f"Run directory: [bold]{result.run_dir}[/]", highlight=False)
    if code == ExitCode.CLIENT_BOUND:
        console.print(
            "[red]--strict:[/] the client may have set the pace (warnings above); exit 7",
            highlight=False,
        )
    if code:
        raise typer.Exit(code)


def _progress(quiet: bool, as_json: bool) -> Progress:
    sinks: list[Sink] = [] if quiet else [LiveView(err)]
    if as_json:
        sinks.append(JsonEvents(sys.stdout.buffer))
    return Progress(sinks)


def _resumed_session(run_dir: Path, progress: Progress) -> Session:
    """Rebuild a run from its meta.json and continue it: same suite (checked by digest), same
    target, same plan; finished tasks are kept, the rest run."""
    meta = store.read_json(run_dir / store.META)
    how = meta.get("invocation")
    if not how:
        raise PerfbenchError(f"{run_dir} does not record how it was started; it cannot resume")
    if meta.get("status") == "completed":
        raise PerfbenchError(f"{run_dir} is complete; nothing to resume")
    suite = load_suite([Path(p) for p in how["cases"]])
    plan_doc = dict(meta["plan"])
    load = plan_doc.pop("load", None)
    kind = meta["load"]["shape"]
    shape: Load | None = None
    if load and kind == "adaptive":
        shape = Adaptive(**load)
    elif load and kind == "rate":
        shape = Rate(**load)
    plan = Plan(**plan_doc, load=shape)
    options = TargetOptions(**how["options"])
    prices = Path(how["prices"]) if how.get("prices") else None
    return Session(
        suite,
        resolve(how["target"], options),
        plan,
        run_dir=run_dir,
        label=meta.get("label"),
        on_pass=progress.phase,
        observers=progress.observers(),
        on_start=progress.started,
        pricer=load_pricer(prices),
        invocation=how,
        resume=True,
        recipe=(how["target"], options),
    )


def _workers(text: str, plan: Plan) -> int:
    if text == "auto":
        return auto_workers(plan)
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise typer.BadParameter("--workers takes a positive number or auto")
    return count


def _ramp(text: str) -> float | None:
    """--ramp-up: None for auto (Plan.ramp_seconds), else seconds."""
    if text == "auto":
        return None
    try:
        seconds = float(text.removesuffix("s"))
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise typer.BadParameter(f"--ramp-up takes seconds (0–3600) or auto, not {text!r}")
    return seconds


# The options that may go with --resume: any other would change the plan the run recorded.
_RESUME_KEEPS = {"resume", "quiet", "as_json", "strict"}
_ADAPTIVE_ONLY = ("max_concurrency", "start", "decrease")


def _check_given(ctx: typer.Context, resuming: bool, rate: bool, adaptive: bool) -> None:
    """Options given on the command line that the run would ignore are errors, not silence."""
    given = [p for p in ctx.command.params if p.name and _on_command_line(ctx, p.name)]

    def flags(names: Iterable[str]) -> str:
        return ", ".join(max(p.opts, key=len) for p in given if p.name in names)

    if resuming and (ignored := flags({p.name or "" for p in given} - _RESUME_KEEPS)):
        raise typer.BadParameter(
            f"--resume continues the run as it was started (its meta.json records the suite, "
            f"target and plan): drop {ignored}, or start a new run"
        )
    if (rate or adaptive) and flags({"concurrency", "ramp_up"}):
        raise typer.BadParameter(
            f"{flags({'concurrency', 'ramp_up'})}: only for a fixed closed loop. With --rate "
            "the rate sets the load (--max-in-flight caps it); with --adaptive, --start and "
            "--max-concurrency bound it"
        )
    if not adaptive and (ignored := flags(_ADAPTIVE_ONLY)):
        raise typer.BadParameter(f"{ignored}: only with --adaptive")
    if not rate and flags({"arrival"}):
        raise typer.BadParameter("--arrival: only with --rate")


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    # typer's click keeps ParameterSource in a private module: compared by name.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _load_shape(
    rate: float | None,
    arrival: str,
    duration: float | None,
    max_in_flight: int | None,
    adaptive: bool,
    maximum: int,
    start: int,
    decrease: float,
) -> Load | None:
    if rate is not None and adaptive:
        raise typer.BadParameter("choose one load shape: --rate (open loop) or --adaptive")
    if arrival not in ("constant", "poisson"):
        raise typer.BadParameter("--arrival takes constant or poisson")
    if rate is not None:
        kind: Literal["constant", "poisson"] = "poisson" if arrival == "poisson" else "constant"
        return Rate(rate, kind, duration, max_in_flight)
    if duration is not None or max_in_flight is not None:
        raise typer.BadParameter("--duration and --max-in-flight go with --rate")
    if adaptive:
        return Adaptive(start=start, maximum=maximum, decrease=decrease)
    return None


async def _run_with_sigint(session: Session) -> RunResult:
    """First Ctrl-C stops the run cleanly (measured tasks kept); a second one aborts."""
    async with anyio.create_task_group() as tg:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                task_status.started()
                async for _ in signals:
                    err.print("Interrupted: stopping; Ctrl-C again to abort at once.")
                    session.stop()
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    return

        await tg.start(watch)  # the handler is in place before the first task can start
        result = await session.run()
        tg.cancel_scope.cancel()
    return result


def _print_result(summary: dict[str, Any], meta: dict[str, Any], console: Console = out) -> None:
    console.print(tables.overview(summary, meta))
    if summary["runs"]:
        console.print(tables.case_table(summary, meta))
        console.print(tables.language_table(summary))
        console.print(tables.cost_table(summary, meta))
        if summary["pooled"].get("tags"):
            console.print(tables.cost_table(summary, meta, "tags"))
        console.print(tables.run_table(summary))
        failures = tables.failure_table(summary)
        if failures is not None:
            console.print(failures)
    for note in advise(summary, meta):
        console.print(f"[yellow]warning:[/] {note}", highlight=False)


def _numbers(text: str | None, name: str) -> tuple[float, ...]:
    if not text:
        return ()
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{name} takes numbers separated by commas, e.g. 1,2,4,8"
        ) from None
    if any(v <= 0 for v in values):
        raise typer.BadParameter(f"{name} levels must be positive")
    return tuple(sorted(set(values)))


_SLO = re.compile(r"^\s*(p50|p95|p99|mean)\s*<\s*([\d.]+)\s*(ms|s)\s*$")


def _slo(text: str | None) -> tuple[str, float] | None:
    if not text:
        return None
    found = _SLO.match(text)
    if not found:
        raise typer.BadParameter("--slo looks like 'p95<2s' or 'p99<800ms'")
    scale = 1e-3 if found.group(3) == "ms" else 1.0
    return found.group(1), float(found.group(2)) * scale


@app.command()
def sweep(
    cases: OptionalCasesArg = None,
    target: Annotated[str, typer.Option("--target", "-t", help="As for `run`.")] = "mock+http",
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", "-c", help="Levels, e.g. 1,2,4,8,16,32.")
    ] = None,
    rates: Annotated[
        str | None, typer.Option(help="Open-loop levels in tasks/s, e.g. 1,2,5,10.")
    ] = None,
    auto: Annotated[
        bool, typer.Option(help="Double concurrency from 1 (the default when no levels given).")
    ] = False,
    max_level: Annotated[
        float, typer.Option(min=1, help="Auto mode (no levels given): stop doubling here.")
    ] = 1024,
    runs: Annotated[int, typer.Option(min=1, help="Measured runs per level.")] = 3,
    warmup: Annotated[int, typer.Option(min=0, help="Warmup passes per level.")] = 1,
    repeat: Annotated[
        int, typer.Option(min=1, help="Executions of each case per pass at each level.")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Seed for every simulated draw.")] = 0,
    slo: Annotated[
        str | None, typer.Option(help="Report the largest level meeting it, e.g. 'p95<2s'.")
    ] = None,
    error_budget: Annotated[
        float, typer.Option(min=0, max=1, help="Stop when errors or 429s exceed this share.")
    ] = 0.01,
    p95_factor: Annotated[
        float, typer.Option(min=1, help="Stop when P95 exceeds this × the lowest level's.")
    ] = 3.0,
    min_gain: Annotated[
        float, typer.Option(min=0, help="Stop when doubling gains less throughput than this.")
    ] = 0.10,
    base_url: Annotated[str | None, typer.Option(help="As for `run`.")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="As for `run`.")] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder in which the sweep directory is created.")
    ] = Path("runs"),
    as_json: Annotated[
        bool,
        typer.Option("--json", help="level_finished and run_finished events as JSON lines."),
    ] = False,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue an interrupted sweep directory: finished levels are kept."),
    ] = None,
    workers: Annotated[
        str,
        typer.Option(
            help="Processes per level: a number, or auto (chosen per level as for `run`: "
            "one per 128 in flight or 1,000 tasks/s, at most one per core)."
        ),
    ] = "auto",
    ramp_up: RampUpOption = "auto",
) -> None:
    """Run the suite at a series of load levels and find where the target stops scaling.

    Without --concurrency or --rates, doubles concurrency from 1 until errors/429s pass the
    budget, P95 grows past --p95-factor, or throughput stops growing; then bisects between
    the last good and the first bad level.

    Example: [bold]perfbench sweep cases/ -t mock+http:rate-limited --runs 1[/]
    """
    levels = _numbers(concurrency, "--concurrency")
    rate_levels = _numbers(rates, "--rates")
    if levels and rate_levels:
        raise typer.BadParameter("give --concurrency or --rates, not both")
    if auto and (levels or rate_levels):
        raise typer.BadParameter("--auto finds its own levels: drop --concurrency/--rates")
    with _errors():
        if resume is not None:
            how = sweeps.read_plan(resume)
            cases = [Path(p) for p in how["cases"]]
            target, base_url = how["target"], how["options"]["base_url"]
            api_key_env, seed = how["options"]["api_key_env"], how["options"]["seed"]
            plan = plan_from_doc(how["plan"])
        elif not cases:
            raise typer.BadParameter("give case files or folders (or --resume SWEEP_DIR)")
        else:
            plan = SweepPlan(
                base=Plan(
                    runs=runs, warmup=warmup, repeat=repeat, seed=seed, ramp_up=_ramp(ramp_up)
                ),
                levels=levels or rate_levels,
                rates=bool(rate_levels),
                max_level=max_level,
                rule=StopRule(error_budget, p95_factor, min_gain),
                slo=_slo(slo),
                workers=0 if workers == "auto" else _workers(workers, Plan()),
            )
        suite = load_suite(cases)
        invocation = {
            "cases": [str(p.resolve()) for p in cases],
            "target": target,
            "options": {"base_url": base_url, "api_key_env": api_key_env, "seed": seed},
            "plan": plan_doc(plan),
        }

        def recipe(n: int) -> tuple[str, TargetOptions]:
            options = TargetOptions(
                base_url=base_url, api_key_env=api_key_env, concurrency=n, seed=seed
            )
            return target, options

        def factory(n: int) -> Any:
            return resolve(*recipe(n))

        events = JsonEvents(sys.stdout.buffer) if as_json else None
        started = time.monotonic()

        def on_level(level: Level, reason: str | None) -> None:
            status = f"stop: {reason}" if reason else "ok"
            err.print(
                f"level {level.level:g}: {level.throughput:.2f} tasks/s, "
                f"P95 {seconds(level.p95)} · {status}",
                highlight=False,
            )
            if events is not None:
                events.run_id = sweeper.path.name if sweeper.path else None
                events.emit(
                    "level_finished",
                    time.monotonic() - started,
                    level=level.level,
                    throughput=level.throughput,
                    p95_s=level.p95,
                    error_rate=level.error_rate,
                    throttle_rate=level.throttle_rate,
                    stop_reason=reason,
                )

        name = factory(1).name
        sweeper = Sweep(
            suite,
            factory,
            plan,
            out_root=out_dir,
            target_name=name,
            on_level=on_level,
            invocation=invocation,
            resume=resume,
            progress=Progress([LiveView(err)]),
            recipe=recipe,
        )
        result = anyio.run(sweeper.run, backend_options=host.loop_options())
    console = err if as_json else out
    console.print(
        sweep_markdown(result.levels, result.findings, rates=plan.rates, slo=plan.slo),
        highlight=False,
        markup=False,
    )
    console.print(f"Sweep directory: [bold]{result.path}[/]", highlight=False)
    if events is not None:
        events.emit(
            "run_finished",
            time.monotonic() - started,
            status="completed",
            exit_code=0,
            levels=len(result.levels),
            knee=result.findings.get("knee"),
            run_dir=str(result.path),
        )


@app.command("list")
def list_(
    folder: Annotated[
        Path | None, typer.Argument(help="Folder of run directories (or use --root).")
    ] = None,
    root: RootOpt = Path("runs"),
) -> None:
    """List runs (newest last) from their meta.json: time, suite, target, label, P50/P95."""
    root = folder or root
    table = Table()
    for col in ("run", "started", "suite", "target", "label", "tasks", "P50", "P95", "status"):
        table.add_column(col, justify="right" if col in ("tasks", "P50", "P95") else "left")
    runs = store.list_runs(root)
    for info in runs:
        m = info.meta
        head = m.get("headline") or {}
        table.add_row(
            info.path.name,
            str(m.get("started_at", "")),
            str(m.get("suite", {}).get("name", "")),
            str(m.get("target", "")),
            m.get("label") or "",
            str(head.get("tasks", "–")),
            seconds(head.get("p50")),
            seconds(head.get("p95")),
            store.status(m),
        )
    if not table.row_count:
        err.print(f"No runs in {root}/. Start one with: perfbench run cases/")
        return
    out.print(table)
    if any(store.status(info.meta) == "killed" for info in runs):
        err.print(
            "A killed run keeps what it measured: continue it with perfbench run --resume DIR"
        )


@app.command()
def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run directory, name or label.")],
    root: RootOpt = Path("runs"),
) -> None:
    """Print one run's summary (recomputed from samples.jsonl if the run never finished)."""
    with _errors():
        run_dir, meta, summary = _load_run(run_ref, root)
    _print_result(summary, meta)
    out.print(f"Run directory: [bold]{run_dir}[/]", highlight=False)


def _load_run(ref: str, root: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """A run's directory, meta and summary; the summary is recomputed from samples.jsonl when
    the run was killed before writing it."""
    run_dir = store.resolve_run(ref, root)
    meta = store.read_meta(run_dir)
    return run_dir, meta, store.read_summary(run_dir, meta)


def _load_side(ref: str, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """One side of a comparison: a run, or with a shell pattern (``'base-*'``) every matching
    run directory, their runs pooled as one side's repetitions. That is how baseline and
    candidate measured interleaved on one CI runner (one run per directory) are compared."""
    if not any(ch in ref for ch in "*?["):
        _, meta, summary = _load_run(ref, root)
        return meta, summary
    dirs = store.match_runs(ref, root)
    if not dirs:
        raise StoreError(f"no run directory in {root}/ has a name or label matching '{ref}'")
    loaded = [_load_run(str(d), root)[1:] for d in dirs]
    if len({m["suite"].get("digest") for m, _ in loaded}) > 1:
        raise GateError(f"the runs matching '{ref}' measured different suites")
    runs = [run for _, summary in loaded for run in summary["runs"]]
    unfinished = [m["status"] for m, _ in loaded if m.get("status") != "completed"]
    meta = {
        **loaded[0][0],
        "id": f"{ref} ({len(dirs)} run directories)",
        "label": None,
        "status": unfinished[0] if unfinished else "completed",
    }
    return meta, {"runs": runs, "across_runs": across_runs(runs)}


_OUTCOME_CODES: dict[Outcome, ExitCode] = {
    "pass": ExitCode.OK,
    "regression": ExitCode.REGRESSION,
    "threshold": ExitCode.THRESHOLD,
    "inconclusive": ExitCode.INCONCLUSIVE,
}


@app.command("compare")
def compare_(
    baseline_ref: Annotated[
        str, typer.Argument(metavar="BASELINE", help="Run directory, name or label.")
    ],
    candidate_ref: Annotated[
        str | None,
        typer.Argument(
            metavar="[CANDIDATE]",
            help="Run directory, name or label. Alone, BASELINE is checked against --threshold.",
        ),
    ] = None,
    max_regression: Annotated[
        list[str] | None,
        typer.Option(
            "--max-regression",
            help="Relative threshold per metric, e.g. p95=15% (repeatable). Metrics: "
            + ", ".join(BY_NAME),
        ),
    ] = None,
    floor: Annotated[
        list[str] | None,
        typer.Option("--floor", help="Absolute floor per metric, e.g. p50=5ms (repeatable)."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="Absolute limit on the candidate, k6 style: 'p95<2s', 'error_rate<1%', "
            "'p99{case=answer-en}<800ms' (repeatable).",
        ),
    ] = None,
    gate_metrics: Annotated[
        str | None, typer.Option("--gate", help="Gate only these metrics: p50,p95,error_rate.")
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option(
            help="Gated scopes: overall (default), cases, languages or all; more than overall "
            "turns on the Benjamini-Hochberg correction."
        ),
    ] = None,
    alpha: Annotated[float | None, typer.Option(help="Significance level (default 0.05).")] = None,
    strict: Annotated[
        bool | None,
        typer.Option(
            "--strict/--no-strict",
            help=(
                "Fail (exit 6) on an inconclusive result: a big change that is not significant "
                "(more runs needed), or a run that did not complete."
            ),
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compare runs of different suites anyway.")
    ] = False,
    config_file: Annotated[
        Path | None,
        typer.Option("--config", help="Settings file (default: ./perfbench.toml or pyproject)."),
    ] = None,
    markdown_file: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the Markdown summary here.")
    ] = None,
    junit_file: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the verdict as JSON instead of Markdown.")
    ] = False,
    root: RootOpt = Path("runs"),
) -> None:
    """Compare a candidate run with a baseline; the exit code is the verdict.

    Each metric's run-level values are tested (one-sided exact Mann-Whitney); a metric regresses
    when its median moved beyond its threshold and floor and p < alpha. Exit codes: 0 pass,
    4 regression, 5 threshold breached, 6 inconclusive (with --strict: a change that needs more
    runs, or a run that did not complete), 3 perfbench error.
    """
    with _errors():
        settings = config.compare_settings(config_file or config.find(Path.cwd()))
        thresholds = [
            parse_threshold(t) for t in [*settings.get("thresholds", []), *(threshold or [])]
        ]
        rules = build_rules(
            settings,
            max_regression or (),
            floor or (),
            [gate_metrics] if gate_metrics else None,
            [scope] if scope else None,
            alpha,
        )
        if candidate_ref is None and not thresholds:
            raise GateError("give a baseline and a candidate, or one run and --threshold")
        cand_meta, cand_summary = _load_side(candidate_ref or baseline_ref, root)
        result, base_meta, notes = None, cand_meta, list(_run_notes(cand_meta, "candidate"))
        if candidate_ref is not None:
            base_meta, base_summary = _load_side(baseline_ref, root)
            notes += _pair_notes(base_meta, cand_meta, force)
            notes += _label_notes((baseline_ref, candidate_ref), root)
            notes += _run_notes(base_meta, "baseline")
            result = compare(base_summary, cand_summary, rules)
        checked = check_thresholds(cand_summary, thresholds)
    strict_on = strict if strict is not None else bool(settings.get("strict", False))
    complete = all(m.get("status") == "completed" for m in (base_meta, cand_meta))
    verdict = outcome(result, checked, strict_on, complete)
    if result is not None:
        text = compare_md.comparison(result, base_meta, cand_meta, checked, verdict, notes)
    else:
        text = compare_md.thresholds_only(cand_meta, checked, verdict, notes)
    if as_json:
        _print_json(result, base_meta, cand_meta, checked, verdict, notes)
    else:
        sys.stdout.write(text)
    with _errors():
        if markdown_file is not None:
            _write_text(markdown_file, text)
        if junit_file is not None:
            _write_text(junit_file, junit(result, checked))
        summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_path:
            _write_text(Path(summary_path), text, append=True)
    raise typer.Exit(_OUTCOME_CODES[verdict])


def _write_text(path: Path, text: str, append: bool = False) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _run_notes(meta: Mapping[str, Any], side: str) -> Iterator[str]:
    if meta.get("status") != "completed":
        yield (
            f"the {side} run {meta['id']} did not complete ({meta.get('status')}): its summary "
            f"covers only what was measured; finish it with `perfbench run --resume`"
        )


def _pair_notes(base: Mapping[str, Any], cand: Mapping[str, Any], force: bool) -> list[str]:
    """Refuse runs of different suites unless forced; warn where the runs' conditions differ."""
    notes = []
    digests = base["suite"].get("digest"), cand["suite"].get("digest")
    if digests[0] != digests[1]:
        if not force:
            raise GateError(
                f"the runs measured different suites (digest {str(digests[0])[:12]} vs "
                f"{str(digests[1])[:12]}): their figures are not comparable; use --force to "
                "compare anyway"
            )
        notes.append("the runs measured different suites (compared with --force)")
    if base.get("host") != cand.get("host"):
        notes.append(
            "the runs were made on different hosts: latency differences may be the machine's; "
            "run baseline and candidate on the same runner"
        )
    if base["id"] == cand["id"]:
        notes.append("baseline and candidate are the same run")
    if base.get("target") != cand.get("target"):
        notes.append(
            f"the runs measured different targets ({base.get('target')} vs {cand.get('target')})"
        )
    if base.get("load") != cand.get("load"):
        notes.append(
            f"the runs had different loads ({_load_text(base)} vs {_load_text(cand)}): "
            "throughput and latency depend on the load as much as on the release"
        )
    if base.get("perfbench_version") != cand.get("perfbench_version"):
        notes.append(
            f"perfbench versions differ ({base.get('perfbench_version')} vs "
            f"{cand.get('perfbench_version')})"
        )
    return notes


def _load_text(meta: Mapping[str, Any]) -> str:
    load = meta.get("load") or {}
    details = ", ".join(f"{k} {v}" for k, v in load.items() if k != "shape" and v is not None)
    return f"{load.get('shape', '?')}" + (f": {details}" if details else "")


def _label_notes(refs: Sequence[str], root: Path) -> list[str]:
    """A label given to several runs names the newest: say so, since it may not be the one
    meant (a re-run under the same label, a copied CI command)."""
    labels = [r for r in refs if not Path(r).is_dir() and not any(ch in r for ch in "*?[")]
    runs = store.list_runs(root) if labels else []  # one scan of the runs, not one per side
    notes = []
    for ref in dict.fromkeys(labels):
        named = [r for r in runs if r.meta.get("label") == ref]
        if len(named) > 1:
            notes.append(
                f"label '{ref}' names {len(named)} runs; the newest, {named[-1].path.name}, was "
                "used (give a run directory to choose another)"
            )
    return notes


def _print_json(
    result: Comparison | None,
    base_meta: Mapping[str, Any],
    cand_meta: Mapping[str, Any],
    checked: list[ThresholdResult],
    verdict: Outcome,
    notes: list[str],
) -> None:
    """The verdict for scripts: the Comparison dataclass as it is (it is the export schema)."""
    doc = {
        "outcome": verdict,
        "exit_code": int(_OUTCOME_CODES[verdict]),
        "baseline": base_meta["id"] if result is not None else None,
        "candidate": cand_meta["id"],
        "comparison": asdict(result) if result is not None else None,
        "thresholds": [asdict(t) for t in checked],
        "notes": notes,
    }
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


@app.command()
def report(
    run_refs: Annotated[
        list[str], typer.Argument(metavar="RUN...", help="Run directories, names or labels.")
    ],
    baseline_ref: Annotated[
        str | None,
        typer.Option("--baseline", help="Compare every other run with this one (also a RUN)."),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Report folder (default: reports/<last run's name>)."),
    ] = None,
    root: RootOpt = Path("runs"),
) -> None:
    """Write a Markdown report with charts (PNG and SVG) for one or more runs.

    Latency by percentile (all runs overlaid), P95 per case with run-to-run ranges, throughput
    and errors, tokens and cost per language, the adaptive limit over time and the sweep curve
    when present; a table of numbers beside every chart, and with --baseline the comparison
    of each run with it. Reads only meta.json and summary.json, so it is fast on large runs.
    """
    from perfbench.report import release

    with _errors():
        runs = [release.load(ref, root) for ref in sweeps.with_levels(run_refs)]
        baseline = release.load(baseline_ref, root) if baseline_ref else None
        if baseline is not None:
            runs = [r for r in runs if r.path.resolve() != baseline.path.resolve()]
        last = Path(run_refs[-1])  # a sweep's report is named after the sweep
        name = last.name if sweeps.is_sweep(last) else runs[-1].path.name if runs else ""
        folder = out_dir or Path("reports") / name if runs else out_dir
        if folder is None:
            raise GateError("give at least one run besides --baseline")
        path = release.build(runs, baseline, folder)
    out.print(f"Report: [bold]{path}[/]", highlight=False)


@app.command("export")
def export_(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run directory, name or label.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="csv, parquet (needs pyarrow) or json (lines).")
    ] = "csv",
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file (default: samples.<ext> in the run dir)."),
    ] = None,
    phase: Annotated[str, typer.Option(help="measured, warmup or all.")] = "measured",
    root: RootOpt = Path("runs"),
) -> None:
    """Write a run's samples as a table (one row per task) for notebooks and other tools.

    From Python: `perfbench.export.load_run(path).samples()` gives the same pandas DataFrame.
    """
    from perfbench import export

    if fmt not in export.FORMATS:
        raise typer.BadParameter(f"--format is one of {', '.join(export.FORMATS)}")
    if phase not in export.PHASES:
        raise typer.BadParameter(f"--phase is one of {', '.join(export.PHASES)}")
    with _errors():
        run = export.load_run(store.resolve_run(run_ref, root))
        written = export.export(run, fmt, out_path, phase)
    err.print(f"Wrote [bold]{written}[/]", highlight=False)


@app.command()
def calibrate(
    path: Annotated[
        str,
        typer.Option(
            "--path",
            "-p",
            help="http (the HTTP client and agent loop: model, mock+http and http+agent "
            "targets), in-process (mock and python: targets), or all.",
        ),
    ] = "all",
    tasks: Annotated[
        int, typer.Option(min=100, help="Short tasks measured per path (streams: a sixth).")
    ] = 3000,
    show: Annotated[
        bool, typer.Option("--show", help="Print what is stored; measure nothing.")
    ] = False,
) -> None:
    """Measure perfbench's own ceiling on this machine against the zero-latency mock, and store it.

    One worker, no latency anywhere: what is measured is the client. Short non-streaming calls
    at 64 in flight (calls/s, client CPU per call) and 200-token streams at 16 in flight
    (streamed tokens/s). Every later run compares its load per worker with these figures and
    warns (exit 7 with [bold]run --strict[/]) above 70% of them. Stored per machine in
    ~/.cache/perfbench/calibration.json ($PERFBENCH_CALIBRATION to choose the file).
    """
    from perfbench import calibrate as calibration
    from perfbench.store import machine

    kinds = ("http", "in-process") if path == "all" else (path,)
    if any(k not in ("http", "in-process") for k in kinds):
        raise typer.BadParameter("--path takes http, in-process or all")
    with _errors():
        if not show:
            for kind in kinds:
                err.print(f"Calibrating the {kind} path ({tasks:,} short tasks, then streams)…")
                figures = anyio.run(
                    calibration.measure, kind, tasks, backend_options=host.loop_options()
                )
                stored = machine.save(kind, figures)
            err.print(f"Stored in [bold]{stored}[/]", highlight=False)
        found = machine.load()
        if not found:
            where = machine.path()
            raise PerfbenchError(f"nothing is calibrated in {where}: run perfbench calibrate")
    table = Table(title="perfbench's ceiling per worker on this machine")
    for col in ("path", "calls/s", "CPU ms/call", "streamed tokens/s", "measured", "version"):
        table.add_column(col, justify="left" if col in ("path", "measured") else "right")
    for kind, f in sorted(found.items()):
        table.add_row(
            kind,
            f"{f['calls_per_s']:,.0f}",
            f"{f['cpu_ms_per_call']:.3f}",
            f"{f['stream_tokens_per_s']:,.0f}",
            str(f["measured_at"]),
            str(f["perfbench_version"]),
        )
    out.print(table)


@cases_app.command("check")
def cases_check(cases: CasesArg) -> None:
    """Validate case files and print the cases; errors name file, line and field."""
    with _errors():
        suite = load_suite(cases)
    table = Table(title=f"{suite.name}: {len(suite.cases)} cases, digest {suite.digest[:12]}")
    for col in ("id", "lang", "tools", "calls", "tags", "timeout", "source"):
        table.add_column(col, no_wrap=col in ("id", "source"))
    for c in suite.cases:
        table.add_row(
            c.id,
            c.language,
            str(len(c.tools)),
            str(len(c.expect.tool_calls)) if c.expect.tool_calls else "–",
            ", ".join(c.tags),
            f"{c.timeout_s:g} s",
            suite.sources[c.id],
        )
    out.print(table)


@mock_app.command("serve")
def mock_serve(
    profile: Annotated[
        str, typer.Option(help="Profile name from `perfbench mock profiles`, or a YAML path.")
    ] = "default",
    host: Annotated[str, typer.Option(help="Address to bind; loopback by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port; 0 picks a free one.")] = 0,
    seed: Annotated[int, typer.Option(help="Seed for every simulated draw.")] = 0,
    timings: Annotated[
        bool,
        typer.Option(
            help="Record when each keyed request arrived and its first token was written "
            "(GET URL/stats/timings), to separate the server's own lateness from a client's."
        ),
    ] = False,
    precise: Annotated[
        bool,
        typer.Option(
            help="Write each reply and token within microseconds of its due time, not up to "
            "1 ms late (timers count whole milliseconds), by busy-waiting the last 1.5 ms: "
            "costs the server a core under load. For measuring a client's own error."
        ),
    ] = False,
    until_stdin_closes: Annotated[
        bool,
        typer.Option(
            hidden=True,
            help="Stop when standard input closes: a parent that spawned the server holds it "
            "open, so the server ends with that parent, even one killed with SIGKILL.",
        ),
    ] = False,
) -> None:
    """Serve the mock until stopped (Ctrl-C). Prints the base URL on its first line.

    Point clients at it: OpenAI SDK [bold]base_url=URL/v1[/], Anthropic SDK [bold]base_url=URL[/].
    GET URL/stats counts requests, 429s and injected faults.
    """
    from perfbench.mock.profile import load_profile
    from perfbench.mock.server import MockServer, new_loop, stop_when_closed

    with _errors():
        loaded = load_profile(profile)
    server = MockServer(loaded, seed=seed, host=host, port=port, timings=timings, precise=precise)
    loop = new_loop()
    try:
        url = loop.run_until_complete(server.start())
    except OSError as exc:
        err.print(Text.assemble(("error: ", "bold red"), f"cannot listen on {host}:{port}: {exc}"))
        raise typer.Exit(ExitCode.CONFIG) from None
    # The URL alone on stdout's first line, flushed: scripts and tests read it.
    print(url, flush=True)
    err.print(f"perfbench mock: profile {loaded.name or profile}, seed {seed}; Ctrl-C stops.")
    if until_stdin_closes:
        stop_when_closed(loop, sys.stdin.fileno())
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass
    finally:
        loop.run_until_complete(server.stop())
        loop.close()


@mock_app.command("profiles")
def mock_profiles() -> None:
    """List the shipped mock profiles, one line each."""
    from perfbench.mock.profile import load_profile, shipped

    with _errors():
        for name in shipped():
            out.print(f"[bold]{name:<14}[/] {load_profile(name).description}", highlight=False)


def _reflow(doc: str) -> str:
    """A docstring as help: each paragraph one line, for rich to wrap to the terminal. typer
    keeps a docstring's line breaks after its first paragraph, so a paragraph written for an
    editor's width came out ragged in a narrower terminal."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _reflow_help(*apps: typer.Typer) -> None:
    for each in apps:
        for command in each.registered_commands:
            if command.help is None and command.callback is not None:
                command.help = _reflow(command.callback.__doc__ or "")


_reflow_help(app, cases_app, mock_app)


def main() -> None:
    sys.exit(app())
