"""The flags ``run`` and ``sweep`` share, declared once, and how they become a spec.

Each shared flag is one ``Flag`` in a group below, named as the spec field it sets: adding a
target option is a ``TargetSpec`` field and one ``Flag`` in ``TARGET``, and both commands have
it. ``shared(...)`` adds a group's flags to a command's signature (typer reads it from there)
and hands their values to the command as one ``Flags`` mapping."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from perfbench.apis.retry import MAX_WAIT_S
from perfbench.load import Adaptive, Load, Rate
from perfbench.load import stages as ramping
from perfbench.load import trace as trace_file
from perfbench.spec import Plan, TargetSpec, auto_workers

Flags = Mapping[str, Any]


@dataclass(frozen=True)
class Flag:
    name: str  # the parameter's name: the spec field it sets
    kind: Any  # Annotated[type, typer.Option(...)]
    default: Any


def _flag(name: str, default: Any, kind: Any, *decls: str, panel: str, **options: Any) -> Flag:
    return Flag(
        name, Annotated[kind, typer.Option(*decls, rich_help_panel=panel, **options)], default
    )


_T, _P, _O = "Target", "Passes", "Output"

TARGET = (
    _flag("target", None, list[str] | None, "--target", "-t", panel=_T,
          help="What to measure: mock+http[:profile] (the mock server over HTTP, default), "
          "mock[:profile] (in-process), provider/model (openai, anthropic, deepseek, qwen, "
          "zhipu), http+agent://host/path, python:module:function, or cmd:COMMAND LINE (any "
          "program as the agent, run once per task, its model calls through perfbench's "
          "proxy to --upstream). run takes several (-t A -t B): one run each, the same "
          "cases, then a report comparing them."),
    _flag("proxy", False, bool, "--proxy", panel=_T,
          help="http+agent and python: targets: their model calls through perfbench's proxy "
          "too, timed per call like a cmd: target's; each task is handed its own route (a "
          "python: function as fn(case, proxy=…), an HTTP agent as the request's `proxy` "
          "field), which the agent must send its model calls to. --upstream says where."),
    _flag("upstream", "mock+http", str, panel=_T,
          help="cmd: targets (and --proxy): where the proxy forwards the agent's model calls, "
          "mock+http[:profile] (the mock server, default) or a model target (openai/gpt-4o-"
          "mini; --base-url, --api-key-env and --header apply to it)."),
    _flag("record", None, str | None, panel=_T,
          help="cmd: targets (and --proxy): keep every model call the proxy forwards, its "
          "answer and its "
          "timing, in this file (JSONL, no keys), to replay in CI with a mock profile's "
          "`replay: FILE` (then --upstream mock+http:PROFILE)."),
    _flag("base_url", None, str | None, panel=_T,
          help="Base URL of the server, as its SDK takes it: OpenAI-compatible with /v1 "
          "(http://127.0.0.1:8000/v1), Anthropic without (http://127.0.0.1:8000)."),
    _flag("api", None, str | None, "--api", panel=_T,
          help="The model API to speak: chat (Chat Completions, the default for OpenAI-"
          "compatible servers), responses (OpenAI's Responses API), completions (legacy "
          "/v1/completions, for serving engines; no tools) or messages (Anthropic's). "
          "mock+http takes every one."),
    _flag("api_key_env", None, str | None, panel=_T,
          help="Environment variable holding the API key (keys never go on the command "
          "line, nor into run directories); for http+agent targets it is sent as "
          "'Authorization: Bearer …'."),
    _flag("stream", True, bool, "--stream/--no-stream", panel=_T,
          help="Stream replies (TTFT needs it)."),
    _flag("retries", 3, int, min=0, panel=_T,
          help="Retries of a 429/5xx answer, waiting as the server asks."),
    _flag("max_retry_wait", MAX_WAIT_S, float, min=0, panel=_T,
          help="Seconds a retry may wait for (what the server asks, or a backoff): a longer "
          "ask, or one past what the case's timeout_s leaves, ends the task as refused at once "
          "instead of waiting it out."),
    _flag("headers", None, list[str] | None, "--header", "-H", panel=_T,
          help="An extra request header, 'Name: value' (repeatable), for model and http+agent "
          "targets; ${VARIABLE} in a value is read from the environment, and a credential "
          "(Authorization, x-api-key…) must come that way, so it stays out of argv and the run."),
    _flag("preflight", True, bool, "--preflight/--no-preflight", panel=_T,
          help="Connect to an HTTP target before the first task, and stop at once (exit 3) "
          "when it cannot be reached."),
    _flag("check_tokens", False, bool, panel=_T,
          help="Also count output tokens offline when the API reports usage, to show the "
          "discrepancy (costs client CPU per call)."),
)  # fmt: skip

PASSES = (
    _flag("runs", "5", str, panel=_P,
          help="Measured passes over the suite (per level, in a sweep); statistics are per run. "
          "run also takes auto: start with 5 and add runs, up to --max-runs, until the noise "
          "lets compare see a change of --detect."),
    _flag("warmup", 1, int, min=0, panel=_P,
          help="Warmup passes first; kept in samples.jsonl, not in stats."),
    _flag("repeat", 1, int, min=1, panel=_P,
          help="Executions of each case per pass (raise it for P99)."),
    _flag("seed", 0, int, panel=_P, help="Seed for every simulated draw."),
    _flag("workers", "auto", str, panel=_P,
          help="Processes sharing the load, each with its own event loop and clients: a "
          "number, or auto (one per 128 in flight or 1,000 tasks/s, at most one per core; in "
          "a sweep, chosen per level; with --ray on a cluster, at most one per CPU of the "
          "cluster's, counted when the run joins it). Raise it when a run warns that the "
          "client was the bottleneck."),
    _flag("ray", None, str | None, "--ray", panel=_P,
          help="Run the workers as Ray actors, one CPU each, spread over a cluster: local (a "
          "Ray instance started for the run, on 127.0.0.1), auto (the cluster this machine "
          "is in: RAY_ADDRESS or a `ray start` head) or the head's address (host:port). "
          "--workers says how many. Needs the extra: pip install 'perfbench-llm\\[ray]'. "
          "docs/distributed.md."),
    _flag("ramp_up", "auto", str, panel=_P,
          help="Closed loop: seconds over which the concurrency's task slots start, evenly. "
          "auto: one slot per ms per worker process (0.256 s for -c 256 in one process), so "
          "completions do not all come back at once and queue in the client; 0: all at once, "
          "whose tasks then finish and restart in waves for the whole pass."),
)  # fmt: skip

WORKLOAD = (
    _flag("synthetic", None, str | None, panel="Workload",
          help="Generated prompts instead of case files: 'input=512,output=128,n=200' (tokens "
          "of the tokenizer, o200k_base by default); also dist=normal|lognormal|uniform, "
          "stddev, min, max, language=en|es|zh|ja, prefix (shared tokens), prefix_share, "
          "seed. The same spec gives the same prompts and suite digest. docs/workloads.md; a "
          "case file's `source:` block does the same, and takes ShareGPT and JSONL/CSV files."),
)  # fmt: skip

OUTPUT = (
    _flag("label", None, str | None, panel=_O,
          help="A release or build name, e.g. v1.4.0; used by compare."),
    _flag("out_dir", Path("runs"), Path, "--out", panel=_O,
          help="Folder in which the run (or sweep) directory is created."),
    _flag("prices", None, Path | None, panel=_O,
          help="Dated price overrides (YAML); default ./perfbench.prices.yaml if any."),
    _flag("force", False, bool, "--force", panel=_O,
          help="Overwrite an existing --record file (never a case file or a run's own)."),
    _flag("quiet", False, bool, "--quiet", "-q", panel=_O, help="No progress lines."),
    _flag("as_json", False, bool, "--json", panel=_O,
          help="Events as JSON lines on stdout (docs/events.md; a sweep: level_finished and "
          "run_finished); the tables go to stderr."),
)  # fmt: skip

SERVER = (
    _flag("server_metrics", None, str | None, panel=_O,
          help="The server's Prometheus page (vLLM, SGLang, TGI: http://host:8000/metrics), "
          "read every --scrape-interval seconds during the run (each level's, in a sweep) into "
          "server_metrics.jsonl, and summarised (running and waiting requests, KV-cache use) "
          "beside the run's figures."),
    _flag("scrape_interval", 1.0, float, min=0.1, panel=_O, help="Seconds between scrapes."),
)  # fmt: skip

CasesArg = Annotated[
    list[Path] | None,
    typer.Argument(help="Case files or folders (searched recursively for *.yaml, *.yml)."),
]


def shared(
    *groups: Iterable[Flag], defaults: Mapping[str, Any] | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the groups' flags to a command; it receives their values as ``flags``."""
    flags = [f for group in groups for f in group]
    overrides = defaults or {}

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(command).parameters.values() if p.name != "flags"]
        added = [
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=overrides.get(f.name, f.default),
                annotation=f.kind,
            )
            for f in flags
        ]  # fmt: skip

        @functools.wraps(command)
        def wrapper(**values: Any) -> None:
            given = {f.name: values.pop(f.name) for f in flags}
            command(**values, flags=given)

        hints = {k: v for k, v in inspect.get_annotations(command, eval_str=True).items()}
        hints.pop("flags", None)
        wrapper.__annotations__ = {**hints, **{f.name: f.kind for f in flags}}
        own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own]
        wrapper.__signature__ = inspect.Signature([*own, *added])  # type: ignore[attr-defined]
        return wrapper

    return decorate


DEFAULT_TARGET = "mock+http"


def target_specs(flags: Flags) -> list[TargetSpec]:
    """One spec per -t given (the default target when none), the other target flags shared."""
    values = {f.name: flags[f.name] for f in TARGET}
    values["headers"] = tuple(values["headers"] or ())  # a repeated flag gives a list
    if values["record"]:  # absolute: a resumed run may start from another folder
        values["record"] = str(Path(values["record"]).resolve())
    targets = values.pop("target") or [DEFAULT_TARGET]
    if len(set(targets)) != len(targets):
        raise typer.BadParameter("-t: the same target twice; give each once")
    return [TargetSpec(target=target, **values) for target in targets]


def target_spec(flags: Flags) -> TargetSpec:
    """The one target of a command that measures one (sweep, ab)."""
    specs = target_specs(flags)
    if len(specs) > 1:
        raise typer.BadParameter("-t: this command measures one target (run takes several)")
    return specs[0]


def plan(
    flags: Flags,
    *,
    concurrency: int = 1,
    load: Load | None = None,
    duration: float | None = None,
    stages: str | None = None,
) -> Plan:
    """The plan the flags describe, its worker count settled (``--workers auto``);
    ``duration``: a closed loop's measured seconds (an open loop's are its load's)."""
    if stages and (rates := ramping.parse_rates(stages)):  # tasks per second: an open loop
        load, stages = ramping.open_loop(rates), None
    made = Plan(
        runs=runs(flags["runs"]),
        warmup=flags["warmup"],
        repeat=flags["repeat"],
        concurrency=concurrency,
        seed=flags["seed"],
        load=load,
        ramp_up=ramp(flags["ramp_up"]),
        ray=flags["ray"],
        duration_s=None if isinstance(load, Rate) else duration,
        stages=ramping.parse(stages) if stages else None,
    )
    return replace(made, workers=workers(flags["workers"], made))


AUTO_FIRST_RUNS = 5  # `--runs auto` starts here: the fewest with which a 5% test can pass at all


def runs(text: str) -> int:
    """``--runs``: a positive number, or auto (its first batch; `run` adds runs after it)."""
    if text == "auto":
        return AUTO_FIRST_RUNS
    return _count(text, "--runs takes a positive number (or auto, for run)")


def workers(text: str, of: Plan) -> int:
    """``--workers``; auto on a Ray cluster is 0, settled from the cluster's CPUs when the
    run joins it (``engine.cluster.sized``): this machine's cores say nothing of it."""
    if text == "auto":
        return 0 if of.ray not in (None, "local") else auto_workers(of)
    return _count(text, "--workers takes a positive number or auto")


def _count(text: str, problem: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise typer.BadParameter(problem)
    return count


def ramp(text: str) -> float | None:
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


def load_shape(
    rate: float | None,
    arrival: str,
    duration: float | None,
    max_in_flight: int | None,
    adaptive: bool,
    maximum: int,
    start: int,
    decrease: float,
    trace: Path | None = None,
) -> Load | None:
    if trace is not None:
        return _replay(trace, rate, adaptive, duration, max_in_flight)
    if rate is not None and adaptive:
        raise typer.BadParameter("choose one load shape: --rate (open loop) or --adaptive")
    if arrival not in ("constant", "poisson"):
        raise typer.BadParameter("--arrival takes constant or poisson")
    if rate is not None:
        kind: Literal["constant", "poisson"] = "poisson" if arrival == "poisson" else "constant"
        return Rate(rate, kind, duration, max_in_flight)
    if max_in_flight is not None:
        raise typer.BadParameter("--max-in-flight goes with --rate")
    if adaptive:
        return Adaptive(start=start, maximum=maximum, decrease=decrease)
    return None


def _replay(
    path: Path, rate: float | None, adaptive: bool, duration: float | None, cap: int | None
) -> Rate:
    """--trace: the open loop at the trace's own arrival times (its mean rate, for show)."""
    if rate is not None or adaptive or duration is not None:
        raise typer.BadParameter("--trace replays its own arrivals: drop --rate, --adaptive "
                                 "and --duration")  # fmt: skip
    offsets = trace_file.read(path)
    span = offsets[-1]
    return Rate(len(offsets) / span if span > 0 else float(len(offsets)), "constant", None, cap,
                trace=offsets)  # fmt: skip


def levels(text: str | None, name: str) -> tuple[float, ...]:
    """A sweep's levels: ``1,2,4,8``, sorted, each once."""
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


# The options that may go with --resume: any other would change what the run recorded.
RESUME_KEEPS = frozenset(
    {"resume", "quiet", "as_json", "strict", "details", "metrics_port", "abort_on", "abort_grace"}
)
_ADAPTIVE_ONLY = ("max_concurrency", "start", "decrease")
NOT_STAGED = {"concurrency", "rate", "adaptive", "duration", "trace", "ramp_up"}


def given(ctx: typer.Context) -> list[Any]:
    """The parameters set on the command line (not by default)."""
    return [p for p in ctx.command.params if p.name and _on_command_line(ctx, p.name)]


def flag_names(params: Iterable[Any], names: Iterable[str]) -> str:
    wanted = set(names)
    return ", ".join(max(p.opts, key=len) for p in params if p.name in wanted)


def check_resume(ctx: typer.Context, resuming: bool) -> None:
    """With --resume the run goes on as it was started: another option would be ignored."""
    params = given(ctx)
    ignored = flag_names(params, {p.name for p in params} - RESUME_KEEPS)
    if resuming and ignored:
        raise typer.BadParameter(
            f"--resume continues the run as it was started (its directory records the suite, "
            f"target and plan): drop {ignored}, or start a new run"
        )


def staged(ctx: typer.Context, flags: Flags, stages: str | None) -> Flags:
    """With stages one run, and of rates no warmup (it replays every stage), unless given."""
    text = stages or ""
    rates = bool(text) and ramping.parse_rates(text) is not None
    keep = {"runs": "1", "warmup": 0} if rates else {"runs": "1"}
    return {**flags, **{k: v for k, v in keep.items() if text and not _on_command_line(ctx, k)}}


def check_load(ctx: typer.Context, rate: bool, adaptive: bool) -> None:
    """Options given on the command line that the run would ignore are errors, not silence."""
    params = given(ctx)
    if ctx.params.get("stages") and (bad := flag_names(params, NOT_STAGED)):
        raise typer.BadParameter(f"{bad}: --stages sets the load over time; drop them")
    closed = flag_names(params, {"concurrency", "ramp_up"})
    if (rate or adaptive) and closed:
        raise typer.BadParameter(
            f"{closed}: only for a fixed closed loop. With --rate the rate sets the load "
            "(--max-in-flight caps it); with --adaptive, --start and --max-concurrency bound it"
        )
    if not adaptive and (ignored := flag_names(params, _ADAPTIVE_ONLY)):
        raise typer.BadParameter(f"{ignored}: only with --adaptive")
    if not rate and flag_names(params, {"arrival"}):
        raise typer.BadParameter("--arrival: only with --rate")


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    # typer's click keeps ParameterSource in a private module: compared by name.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"
