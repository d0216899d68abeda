"""``perfbench calibrate``: the client's own ceiling on this machine.

Calibration measures one worker against the zero-latency mock, where every millisecond is the
harness's own: short non-streaming tasks at 64 in flight (tasks/s, client CPU per model call),
and 200-token streams at 16 in flight (streamed tokens/s). It is done per path: ``http`` (the
HTTP client and agent loop, what model, ``mock+http`` and ``http+agent`` targets use) and
``in-process`` (``mock`` and ``python:`` targets). ``store.machine`` keeps the figures;
``stats.headroom`` compares each later run with them. Nothing imports this module but the CLI:
it runs sessions, so it sits above the engine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfbench.engine.session import Session
from perfbench.errors import PerfbenchError
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import Case, Suite

SHORT = "name: calibrate-short\nttft_ms: 0\nitl_ms: 0\noutput_chars: 4\n"
STREAM = "name: calibrate-stream\nttft_ms: 0\nitl_ms: 0\noutput_chars: 800\n"
MODELS = "models: {sim: {tokens_per_char: {default: 0.25}}}\n"


async def measure(path_kind: str, tasks: int = 3000) -> dict[str, Any]:
    """One worker's ceiling on one path: short calls at 64 in flight, streams at 16."""
    prefix = "mock+http" if path_kind == "http" else "mock"
    suite = Suite.of(
        "calibrate", [Case(id="calibrate", language="en", input="hello", timeout_s=30)]
    )
    with scratch() as folder:
        base = Path(folder)
        figures: dict[str, Any] = {}
        for profile, stream, in_flight, repeat in (
            ("short", False, 64, tasks),
            ("stream", True, 16, max(1, tasks // 6)),
        ):
            spec = RunSpec(
                target=TargetSpec(f"{prefix}:{base / (profile + '.yaml')}", stream=stream),
                plan=Plan(runs=1, warmup=1, repeat=repeat, concurrency=in_flight),
                out=None,
            )
            result = await Session(spec, suite=suite).run()
            figures.update(_figures(profile, result.summary, 2 * repeat))
    return figures


def _figures(profile: str, summary: Mapping[str, Any], tasks: int) -> dict[str, Any]:
    overall = summary["pooled"]["overall"]
    client = summary.get("client") or {}
    if overall["ok"] != overall["tasks"]:
        failures = ", ".join(overall["failures"]) or "unknown"
        raise PerfbenchError(f"calibration tasks failed ({failures}): the figures would be wrong")
    if profile == "short":
        return {
            "calls_per_s": overall["throughput"],
            "cpu_ms_per_call": 1000 * client.get("cpu_s", 0.0) / tasks,
            "short_in_flight": 64,
        }
    return {"stream_tokens_per_s": overall["output_tokens_per_s"], "stream_in_flight": 16}


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A folder with the two zero-latency profiles (files: the mock server is a process that
    takes its profile by path)."""
    folder = tempfile.TemporaryDirectory(prefix="perfbench-calibrate-")
    base = Path(folder.name)
    (base / "short.yaml").write_text(SHORT + MODELS, encoding="utf-8")
    (base / "stream.yaml").write_text(STREAM + MODELS, encoding="utf-8")
    return folder
