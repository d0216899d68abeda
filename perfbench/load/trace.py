"""Arrival traces for `run --trace FILE`: a JSONL file, one arrival a line, replayed as an open
loop with the same coordinated-omission accounting as ``--rate`` (each task's latency is also
measured from its intended start).

A line is a JSON object with the arrival time as ``timestamp`` in milliseconds (the Mooncake
and AIPerf trace convention) or ``timestamp_s`` in seconds; other fields (input and output
lengths, hash ids) are ignored. Times are made offsets from the first arrival, in order."""

from __future__ import annotations

import json
import math
from pathlib import Path

from perfbench.errors import PerfbenchError

MAX_ARRIVALS = 1_000_000  # a trace is held in the run's spec: bounded


class TraceError(PerfbenchError):
    """A trace file that cannot be replayed; the message names file and line."""


def read(path: Path) -> tuple[float, ...]:
    """The arrival offsets (seconds, sorted, the first at 0) of the trace in ``path``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc}") from None
    times = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            times.append(_arrival(line, f"{path}:{number}"))
        if len(times) > MAX_ARRIVALS:
            raise TraceError(f"{path}: more than {MAX_ARRIVALS:,} arrivals; replay a part of it")
    if not times:
        raise TraceError(f"{path}: no arrivals (one JSON object a line, with a timestamp)")
    times.sort()
    return tuple(t - times[0] for t in times)


def _arrival(line: str, where: str) -> float:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: not JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{where}: expected an object with a timestamp")
    if "timestamp_s" in doc:
        value, scale = doc["timestamp_s"], 1.0
    elif "timestamp" in doc:
        value, scale = doc["timestamp"], 1e-3
    else:
        raise TraceError(f"{where}: no timestamp (milliseconds) or timestamp_s (seconds)")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(f"{where}: the timestamp {value!r} is not a number")
    if value < 0:
        raise TraceError(f"{where}: the timestamp {value!r} is negative")
    return float(value) * scale
