"""The client's own ceiling on this machine (``perfbench calibrate``), and how close a run came.

Calibration measures one worker against the zero-latency mock, where every millisecond is the
harness's own: short non-streaming tasks at 64 in flight (tasks/s, client CPU per model call),
and 200-token streams at 16 in flight (streamed tokens/s). It is done per path: ``http`` (the
HTTP client and agent loop, what model, ``mock+http`` and ``http+agent`` targets use) and
``in-process`` (``mock`` and ``python:`` targets). The figures are stored per machine in
``$PERFBENCH_CALIBRATION`` or ``~/.cache/perfbench/calibration.json``.

Every run then compares its own per-worker model calls/s and tokens/s with the stored ceiling
(``headroom``, pure) and says so when it used more than ``NEAR`` of it: a client near its
ceiling queues work, and that queueing shows up as the target's latency.
"""

from __future__ import annotations

import os
import platform
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfbench import __version__, host, store
from perfbench.errors import PerfbenchError, StoreError

NEAR = 0.7  # share of the ceiling above which a run is flagged
STREAM_TOKENS = 200  # tokens per calibration stream (800 characters at 0.25 tokens each)
SHORT = "name: calibrate-short\nttft_ms: 0\nitl_ms: 0\noutput_chars: 4\n"
STREAM = "name: calibrate-stream\nttft_ms: 0\nitl_ms: 0\noutput_chars: 800\n"
MODELS = "models: {sim: {tokens_per_char: {default: 0.25}}}\n"
CASE = "cases:\n  - {id: calibrate, language: en, input: hello, timeout_s: 30}\n"


def path() -> Path:
    explicit = os.environ.get("PERFBENCH_CALIBRATION")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "perfbench" / "calibration.json"


def kind(target: str) -> str:
    """Which measured path a target string runs through."""
    if target.startswith(("mock+http", "http+agent", "http+agents")) or "/" in target.split(":")[0]:
        return "http"
    return "in-process"


def load() -> dict[str, Any]:
    """Stored calibrations by path, for this machine only (another host's ceiling says nothing
    about this one); empty when there are none."""
    try:
        doc: dict[str, Any] = store.read_json(path())
    except (StoreError, FileNotFoundError, ValueError):
        return {}
    if doc.get("host") != _host_key():
        return {}
    return dict(doc.get("paths") or {})


def save(path_kind: str, figures: Mapping[str, Any]) -> Path:
    target = path()
    doc: dict[str, Any] = {"host": _host_key(), "paths": load()}
    doc["paths"][path_kind] = {
        **figures,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "perfbench_version": __version__,
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    store.write_json(target, doc)
    return target


def _host_key() -> dict[str, Any]:
    return {**host.fingerprint(), "node": platform.node()}


def headroom(
    summary: Mapping[str, Any], workers: int, ceiling: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The share of one worker's capacity this run used (pure), by a two-term cost model fitted
    to the calibration: each model call costs ``1 / calls_per_s`` of a second of client time,
    and each streamed token ``1 / stream_tokens_per_s − 1 / (200 × calls_per_s)`` (a
    calibration stream is one call of 200 tokens). The run's calls/s and tokens/s per worker
    (medians across runs) times those costs is ``share``: 1.0 is the ceiling."""
    overall = summary.get("across_runs", {}).get("overall", {})
    pooled = summary.get("pooled", {}).get("overall", {})
    throughput = (overall.get("throughput") or {}).get("median")
    tokens = (overall.get("output_tokens_per_s") or {}).get("median") or 0.0
    calls_ceiling, tokens_ceiling = ceiling.get("calls_per_s"), ceiling.get("stream_tokens_per_s")
    if throughput is None or not calls_ceiling or not tokens_ceiling:
        return None
    calls = throughput * (pooled.get("model_calls") or 1.0) / max(1, workers)
    tokens /= max(1, workers)
    per_token = max(0.0, 1 / tokens_ceiling - 1 / (STREAM_TOKENS * calls_ceiling))
    return {
        "calls_per_s_per_worker": calls,
        "tokens_per_s_per_worker": tokens,
        "share": calls / calls_ceiling + tokens * per_token,
        "ceiling": dict(ceiling),
    }


async def measure(path_kind: str, tasks: int = 3000) -> dict[str, Any]:
    """One worker's ceiling on one path: short calls at 64 in flight, streams at 16."""
    from perfbench.runner import Plan
    from perfbench.session import Session
    from perfbench.suite import load_suite
    from perfbench.targets.registry import TargetOptions, resolve

    prefix = "mock+http" if path_kind == "http" else "mock"
    with scratch() as folder:
        base = Path(folder)
        suite = load_suite([base / "suite.yaml"])
        figures: dict[str, Any] = {}
        for profile, stream, in_flight, repeat in (
            ("short", False, 64, tasks),
            ("stream", True, 16, max(1, tasks // 6)),
        ):
            options = TargetOptions(concurrency=in_flight, stream=stream)
            target = resolve(f"{prefix}:{base / (profile + '.yaml')}", options)
            plan = Plan(runs=1, warmup=1, repeat=repeat, concurrency=in_flight)
            result = await Session(suite, target, plan, out_root=None).run()
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
    """A folder with the calibration suite and the two zero-latency profiles."""
    folder = tempfile.TemporaryDirectory(prefix="perfbench-calibrate-")
    base = Path(folder.name)
    (base / "suite.yaml").write_text(CASE, encoding="utf-8")
    (base / "short.yaml").write_text(SHORT + MODELS, encoding="utf-8")
    (base / "stream.yaml").write_text(STREAM + MODELS, encoding="utf-8")
    return folder
