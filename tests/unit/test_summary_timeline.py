"""summary.json's ITL distribution and its latency timeline: what they count, that the timeline
stays bounded however long the session, keeps warmup visible, and survives the hand-over from
worker processes (take_run / absorb, pickled as over the socket) without loss."""

from __future__ import annotations

import json
import pickle

import pytest

from perfbench.sample import Phase, Sample, Status
from perfbench.stats.histogram import decode
from perfbench.stats.summary import Summarizer, summarize
from perfbench.stats.timeline import BUCKETS, FIRST_WIDTH, Timeline

TIMEOUTS = {"a": 60.0, "b": 60.0}


def sample(
    i: int,
    end: float,
    *,
    latency: float = 0.1,
    phase: Phase = "measured",
    run: int = 0,
    status: Status = "ok",
    itl: float | None = None,
    case: str = "a",
) -> Sample:
    return Sample(
        phase, run, case, i, "en", start=end - latency, end=end, status=status, itl_mean=itl
    )


def test_itl_is_one_value_per_streamed_task_and_stored_per_case() -> None:
    samples = [sample(i, 1.0 + i, itl=0.01 * (i + 1)) for i in range(4)]
    samples.append(sample(9, 9.0))  # not streamed: no ITL
    samples.append(sample(10, 9.5, itl=0.5, case="b", status="error"))  # a failed task's gaps
    summary = summarize(samples, TIMEOUTS)
    itl = summary["pooled"]["overall"]["itl"]
    assert itl["n"] == 5
    assert (itl["min"], itl["max"]) == pytest.approx((0.01, 0.5))
    assert summary["runs"][0]["cases"]["a"]["itl"]["n"] == 4
    blob = summary["histograms"]["run/0/case/a/itl"]
    assert decode(blob).total_count == 4
    assert summary["across_runs"]["overall"]["itl.p50"]["median"] == pytest.approx(0.03)


def test_no_streamed_task_means_no_itl_histogram() -> None:
    summary = summarize([sample(i, 1.0 + i) for i in range(3)], TIMEOUTS)
    assert summary["pooled"]["overall"]["itl"] is None
    assert not [k for k in summary["histograms"] if k.endswith("/itl")]


def test_timeline_counts_every_finished_task_once_with_warmup_as_its_own_phase() -> None:
    samples = [sample(i, 0.1 + 0.2 * i, phase="warmup", latency=0.9) for i in range(5)]
    samples += [sample(i, 1.05 + 0.1 * i, latency=0.1 + 0.01 * i) for i in range(30)]
    samples.append(sample(99, 5.1, status="timeout"))  # counted, not in the percentiles
    samples.append(sample(98, 5.2, status="cancelled"))  # stopped by the operator: left out
    summary = summarize(samples, TIMEOUTS)
    timeline = summary["timeline"]
    assert timeline["bucket_s"] == FIRST_WIDTH  # 5.1 s fits in 64 slots of 0.25 s
    buckets = timeline["buckets"]
    assert sum(b["tasks"] for b in buckets) == 5 + 30 + 1
    assert sum(b["ok"] for b in buckets) == 35
    assert sum(b["tasks"] for b in buckets if b["phase"] == "warmup") == 5
    warm = [b for b in buckets if b["phase"] == "warmup"]
    assert all(b["p95"] == pytest.approx(0.9) for b in warm)  # the cold start shows
    assert [b["t"] for b in buckets] == sorted(b["t"] for b in buckets)
    late = next(b for b in buckets if b["t"] == 5.0)
    assert (late["tasks"], late["ok"], late["p50"]) == (1, 0, None)
    assert json.loads(json.dumps(timeline)) == timeline  # plain JSON


def test_timeline_stays_bounded_by_doubling_its_slots() -> None:
    timeline = Timeline()
    n = 20_000
    for i in range(n):
        timeline.add(sample(i, end=3600.0 * i / n))  # an hour of tasks
    out = timeline.to_json()
    assert BUCKETS // 2 <= len(out["buckets"]) <= BUCKETS
    width = out["bucket_s"]
    assert width >= 3600.0 / BUCKETS and (width / FIRST_WIDTH).is_integer()
    assert sum(b["tasks"] for b in out["buckets"]) == n
    assert all(b["t"] / width == int(b["t"] / width) for b in out["buckets"])  # slot edges
    assert len(json.dumps(out)) < 10_000  # O(buckets), not O(samples)


def test_a_slot_where_warmup_ends_holds_both_phases_warmup_first() -> None:
    timeline = Timeline()
    timeline.add(sample(0, 0.30, phase="measured"))
    timeline.add(sample(1, 0.26, phase="warmup"))
    buckets = timeline.to_json()["buckets"]
    assert [(b["t"], b["phase"]) for b in buckets] == [(0.25, "warmup"), (0.25, "measured")]


def test_merging_a_coarser_timeline_loses_nothing() -> None:
    fine, coarse, both = Timeline(), Timeline(), Timeline()
    early = [sample(i, 0.05 * i + 0.01, latency=0.01 * (i % 7 + 1)) for i in range(40)]
    late = [sample(i, 30.0 + i, latency=0.2) for i in range(40)]  # 70 s: coarsened twice
    for s in early:
        fine.add(s)
        both.add(s)
    for s in late:
        coarse.add(s)
        both.add(s)
    fine.merge(coarse)
    assert fine.to_json() == both.to_json()


def test_a_worker_hands_its_timeline_over_with_its_run() -> None:
    warmup = [sample(i, 0.1 * i + 0.05, phase="warmup") for i in range(6)]
    measured = [sample(i, 1.0 + 0.1 * i, latency=0.05 + 0.01 * i) for i in range(12)]
    alone = summarize(warmup + measured, TIMEOUTS)
    parent = Summarizer(TIMEOUTS)
    for part in (warmup[::2] + measured[::2], warmup[1::2] + measured[1::2]):
        worker = Summarizer(TIMEOUTS)
        for s in part:
            worker.add(s)
        scopes = pickle.loads(pickle.dumps(worker.take_run(0)))  # as over the socket
        assert scopes is not None and scopes.timeline is not None
        parent.absorb(0, scopes)
        assert worker.take_run(0) is None
    merged = parent.finish()
    assert merged["timeline"] == alone["timeline"]
    assert merged["pooled"]["overall"]["ok"] == 12


def test_a_summary_without_tasks_has_no_timeline() -> None:
    assert "timeline" not in summarize([], TIMEOUTS)
