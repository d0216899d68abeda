"""The load-shape options, declared once: ``run`` takes them all, ``ab`` takes --concurrency
(each side's runs), and ``options.load_shape`` turns them into a ``Load``. The parameter names
are the ones ``options`` checks (--resume keeps them, --stages replaces them)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConcurrencyOpt = Annotated[
    int,
    typer.Option(
        "--concurrency", "-c", rich_help_panel="Load", min=1, help="Tasks in flight at once."
    ),
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        rich_help_panel="Load",
        min=0.001,
        help="Open loop: start tasks at this rate (tasks/s) whatever is "
        "in flight; latency is also reported from each task's intended start.",
    ),
]
ArrivalOpt = Annotated[
    str,
    typer.Option(rich_help_panel="Load", help="Open-loop arrivals: constant or poisson (seeded)."),
]
DurationOpt = Annotated[
    float | None,
    typer.Option(
        rich_help_panel="Load",
        min=0.001,
        help="Open loop (--rate): seconds per run. Closed loop (-c N, k6's habit): "
        "seconds of measurement in all, shared by the --runs, each cycling over the suite "
        "until its share is up (tasks in flight then finish, and count), after the warmup "
        "pass. Default: one pass over the suite × --repeat per run.",
    ),
]
TraceOpt = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel="Load",
        help="Open loop replaying a trace: a JSONL file of arrival times (timestamp in ms, "
        "as Mooncake and AIPerf traces, or timestamp_s), each pass starting a task at each "
        "one; latency is also reported from each task's intended start. Given no cases, a "
        "trace whose lines have input_length (output_length, hash_ids) makes one prompt "
        "of that shape per arrival.",
    ),
]
MaxInFlightOpt = Annotated[
    int | None,
    typer.Option(
        rich_help_panel="Load",
        min=1,
        help="Open loop: tasks beyond this many in flight are dropped and "
        "counted, never silently delayed.",
    ),
]
AdaptiveOpt = Annotated[
    bool,
    typer.Option(
        rich_help_panel="Load",
        help="Adaptive concurrency: AIMD on 429s (slow start, ×--decrease).",
    ),
]
MaxConcurrencyOpt = Annotated[
    int, typer.Option(rich_help_panel="Load", min=1, help="Adaptive: upper bound of the limit.")
]
StartOpt = Annotated[
    int, typer.Option(rich_help_panel="Load", min=1, help="Adaptive: starting limit.")
]
DecreaseOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel="Load",
        min=0.1,
        max=0.99,
        help="Adaptive: factor applied per 429 episode.",
    ),
]
StagesOpt = Annotated[
    str | None,
    typer.Option(
        rich_help_panel="Load",
        help="Ramping stages, k6's: '30s:8,60s:32,30s:0' ramps the tasks in flight "
        "linearly to 8 over 30 s, to 32 over 60 s, then down to 0 (durations in ms, s, m, "
        "h); each measured run follows them (one run unless --runs is given). Rates, "
        "'30s:5/s,60s:20/s', ramp an open loop's arrivals instead (k6's ramping-arrival-rate;"
        " no warmup unless --warmup is given). Instead of -c, --duration, --rate and "
        "--adaptive.",
    ),
]
