"""Arrival traces for `run --trace FILE`: a JSONL file, one arrival a line, replayed as an open
loop with the same coordinated-omission accounting as ``--rate`` (each task's latency is also
measured from its intended start).

A line is a JSON object with the arrival time as ``timestamp`` in milliseconds (the Mooncake
and AIPerf trace convention) or ``timestamp_s`` in seconds. Times are made offsets from the
first arrival, in order (lines of one time keep the file's order).

A line may also carry the request's shape, as Mooncake traces do: ``input_length`` and
``output_length`` in tokens, and ``hash_ids``, the ids of the prompt's blocks (a block is
``block_size`` tokens; requests with the same first ids share that prefix, for the server's
prefix cache). Replayed with no cases, each line becomes a prompt of that shape
(``perfbench.sources.trace``); with cases, the shapes are not used. Other fields are ignored."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from perfbench.errors import PerfbenchError

MAX_ARRIVALS = 1_000_000  # a trace is held in the run's spec: bounded


class TraceError(PerfbenchError):
    """A trace file that cannot be replayed; the message names file and line."""


@dataclass(frozen=True)
class Arrival:
    """One line of a trace: when, as an offset from the first arrival, and the request's
    shape when the line gives one."""

    offset: float
    input_length: int | None = None
    output_length: int | None = None
    hash_ids: tuple[int, ...] = ()
    line: int = 0  # where it is in the file, for errors about it later


def read(path: Path) -> tuple[float, ...]:
    """The arrival offsets (seconds, sorted, the first at 0) of the trace in ``path``."""
    return tuple(a.offset for a in arrivals(path))


def arrivals(path: Path) -> list[Arrival]:
    """Every line of the trace in ``path``, sorted by time (the first at offset 0)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc}") from None
    found = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            found.append(_arrival(line, f"{path}:{number}", number))
        if len(found) > MAX_ARRIVALS:
            raise TraceError(f"{path}: more than {MAX_ARRIVALS:,} arrivals; replay a part of it")
    if not found:
        raise TraceError(f"{path}: no arrivals (one JSON object a line, with a timestamp)")
    found.sort(key=lambda a: a.offset)  # stable: lines of one time keep the file's order
    first = found[0].offset
    return [replace(a, offset=a.offset - first) for a in found]


def _arrival(line: str, where: str, number: int) -> Arrival:
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
    return Arrival(
        float(value) * scale,
        _length(doc, "input_length", where),
        _length(doc, "output_length", where),
        _hash_ids(doc.get("hash_ids"), where),
        number,
    )


def _length(doc: dict[str, object], key: str, where: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TraceError(f"{where}: {key} {value!r} is not a whole number of tokens above 0")
    return value


def _hash_ids(value: object, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise TraceError(f"{where}: hash_ids must be a list of whole numbers (block ids)")
    return tuple(value)
