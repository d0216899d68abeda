"""How close a run came to the client's calibrated ceiling (pure).

``perfbench calibrate`` measures one worker against the zero-latency mock; a run then compares
its own per-worker model calls/s and tokens/s with that ceiling, and a share above ``NEAR`` is
flagged: a client near its ceiling queues work, and the queueing shows up as the target's
latency."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NEAR = 0.7  # share of the ceiling above which a run is flagged
STREAM_TOKENS = 200  # tokens per calibration stream (800 characters at 0.25 tokens each)


def headroom(
    summary: Mapping[str, Any], workers: int, ceiling: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The share of one worker's capacity this run used, by a two-term cost model fitted to
    the calibration: each model call costs ``1 / calls_per_s`` of a second of client time,
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
