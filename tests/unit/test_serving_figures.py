"""The serving figures beside TPOT (issue 23 item 3): ITL pooled over every gap as well as
each task's mean gap, TTFO, output tokens per second per request, and the API's usage
against the offline tokenizer per request. All recomputed from samples alone."""

from __future__ import annotations

import random

import pytest

from perfbench.sample import Sample, Step, gap_counts
from perfbench.stats.histogram import Histogram
from perfbench.stats.summary import summarize
from perfbench.suite import Case
from perfbench.task import Task


def test_gaps_are_bucketed_to_three_significant_figures() -> None:
    assert gap_counts([0.000_123_4, 0.000_123_4, 0.0123_44, 0.012_36, 0.5, 2.3456]) == [
        [123, 2], [12_300, 1], [12_400, 1], [500_000, 1], [2_350_000, 1]]  # fmt: skip
    rng = random.Random(1)
    for _ in range(2000):
        gap = rng.lognormvariate(-4, 2)  # 0.1 ms … seconds
        ((us, n),) = gap_counts([gap])
        assert n == 1
        # Within half a step of 3 significant figures (and of a microsecond below 1 ms).
        assert abs(us - gap * 1e6) <= max(0.5, 0.005 * gap * 1e6)


def test_pooled_itl_weighs_every_gap_where_the_task_mean_weighs_every_task() -> None:
    # One task of 99 gaps of 10 ms, one of a single 100 ms gap: pooled, 99 of 100 gaps are
    # 10 ms; per task, half the tasks' means are 100 ms.
    long = Sample("measured", 0, "a", 0, "en", 0.0, 1.0, itl_mean=0.01,
                  itl_gaps=gap_counts([0.01] * 99))  # fmt: skip
    short = Sample("measured", 0, "b", 0, "en", 0.0, 1.0, itl_mean=0.1,
                   itl_gaps=gap_counts([0.1]))  # fmt: skip
    overall = summarize([long, short], {})["pooled"]["overall"]
    assert overall["itl_pooled"]["n"] == 100
    assert overall["itl_pooled"]["p50"] == pytest.approx(0.01)
    assert overall["itl_pooled"]["p99"] == pytest.approx(0.01)
    assert overall["itl_pooled"]["p99_9"] == pytest.approx(0.1)
    assert overall["itl_pooled"]["mean"] == pytest.approx((99 * 0.01 + 0.1) / 100)
    assert overall["itl"]["n"] == 2 and overall["itl"]["max"] == pytest.approx(0.1)


def test_counted_values_give_the_statistics_of_the_values_one_by_one() -> None:
    rng = random.Random(7)
    values = [(rng.uniform(0.001, 0.2), rng.randint(1, 40)) for _ in range(3000)]
    for limit in (10**9, 100):  # exact throughout; spilled into the HDR histogram early
        counted, single = Histogram(exact_limit=limit), Histogram(exact_limit=limit)
        for v, n in values:
            counted.add_count(v, n)
            for _ in range(n):
                single.add(v)
        a, b = counted.summary(), single.summary()
        assert a is not None and b is not None
        assert a["n"] == b["n"] and a["method"] == b["method"]
        for key in ("mean", "stddev", "min", "max", "p50", "p99", "p99_9"):
            assert a[key] == pytest.approx(b[key], rel=1e-9), key


def test_a_task_records_its_gaps_on_the_sample() -> None:
    now = [0.0]
    case = Case(id="c", language="en", input="hi")
    task = Task(case, "measured", 0, 0, 1, lambda: now[0], 0.0)
    task.begin()
    call = task.model_call("m")
    call.sent()
    for t in (0.2, 0.21, 0.23, 0.26):  # TTFT 200 ms, then gaps of 10, 20 and 30 ms
        now[0] = t
        call.token()
    call.finish(tokens_in=5, tokens_out=4)
    sample = task.sample()
    assert sample.itl_gaps == [[10_000, 1], [20_000, 1], [30_000, 1]]
    assert sample.itl_mean == pytest.approx(0.02) and sample.itl_max == pytest.approx(0.03)
    assert Sample.from_json(sample.to_json()).itl_gaps == sample.itl_gaps
    assert sample.ttfo == pytest.approx(0.2)


def test_ttfo_request_rate_and_usage_discrepancy_per_request() -> None:
    fast = Step("model", "m", 0.0, 0.5, ttft=0.1, tokens_out=50, wait=0.0,
                tokens_estimate=40)  # fmt: skip
    slow = Step("model", "m", 0.0, 2.0, ttft=0.1, tokens_out=50, wait=0.0)
    failed = Step("model", "m", 0.0, 0.1, tokens_out=10, status="error", wait=0.0)
    samples = [
        Sample("measured", 0, "a", 0, "en", 0.0, 1.0, ttfo=0.3, steps=[fast, slow]),
        Sample("measured", 0, "b", 0, "en", 0.0, 1.0, ttfo=0.5, steps=[failed], status="error"),
    ]
    overall = summarize(samples, {})["pooled"]["overall"]
    assert overall["ttfo"]["n"] == 2 and overall["ttfo"]["max"] == pytest.approx(0.5)
    rate = overall["request_tokens_per_s"]
    assert rate["n"] == 2  # the failed request has no rate
    assert rate["max"] == pytest.approx(100.0) and rate["min"] == pytest.approx(25.0)
    ratio = overall["request_usage_vs_estimate"]
    assert ratio["n"] == 1 and ratio["p50"] == pytest.approx(50 / 40)


def test_a_step_carries_its_estimate_only_when_there_is_one() -> None:
    bare = Step("model", "m", 0.0)
    assert "tokens_estimate" not in bare.to_json()
    checked = Step("model", "m", 0.0, tokens_out=9, tokens_estimate=8)
    assert Step.from_json(checked.to_json()).tokens_estimate == 8
