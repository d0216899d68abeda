"""The ceiling model (pure): calls and tokens per worker against the calibrated costs."""

from __future__ import annotations

from typing import Any

import pytest

from perfbench.stats.headroom import headroom
from perfbench.targets.registry import path_kind

CEILING = {"calls_per_s": 1000.0, "stream_tokens_per_s": 50_000.0}


def _summary(throughput: float, tokens_per_s: float, calls_per_task: float) -> dict[str, Any]:
    return {
        "across_runs": {
            "overall": {
                "throughput": {"median": throughput},
                "output_tokens_per_s": {"median": tokens_per_s},
            }
        },
        "pooled": {"overall": {"model_calls": calls_per_task}},
    }


def test_short_calls_at_the_ceiling_use_all_of_it() -> None:
    room = headroom(_summary(1000.0, 0.0, 1.0), 1, CEILING)
    assert room is not None and room["share"] == pytest.approx(1.0)


def test_calibration_streams_at_their_own_rate_use_all_of_it() -> None:
    # 250 calls/s of 200 tokens = the calibrated 50,000 tokens/s: exactly the ceiling.
    room = headroom(_summary(250.0, 50_000.0, 1.0), 1, CEILING)
    assert room is not None and room["share"] == pytest.approx(1.0)


def test_load_is_counted_per_worker_and_per_model_call() -> None:
    # 400 tasks/s of 3 model calls over 2 workers = 600 calls/s per worker.
    room = headroom(_summary(400.0, 0.0, 3.0), 2, CEILING)
    assert room is not None
    assert room["calls_per_s_per_worker"] == pytest.approx(600.0)
    assert room["share"] == pytest.approx(0.6)


def test_no_throughput_or_no_ceiling_gives_no_figure() -> None:
    assert headroom({"across_runs": {"overall": {}}}, 1, CEILING) is None
    assert headroom(_summary(10.0, 0.0, 1.0), 1, {"calls_per_s": 1000.0}) is None


@pytest.mark.parametrize(
    ("target", "path"),
    [
        ("mock+http", "http"),
        ("mock+http:zero@gpt-4o", "http"),
        ("openai/gpt-4o", "http"),
        ("http+agent://127.0.0.1:8000/run", "http"),
        ("mock", "in-process"),
        ("mock:/tmp/p.yaml", "in-process"),
        ("python:pkg.mod:fn", "in-process"),
    ],
)
def test_targets_map_to_the_path_they_run_through(target: str, path: str) -> None:
    assert path_kind(target) == path
