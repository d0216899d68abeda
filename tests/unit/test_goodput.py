"""Goodput and the request-level figures (issue 23 item 3): a task of several model calls is
several requests; TPOT per request; the share and rate of requests and tasks meeting every
--slo objective, failed and refused ones counting as misses."""

from __future__ import annotations

import pytest

from perfbench.errors import GateError
from perfbench.sample import Sample, Step
from perfbench.stats import goodput
from perfbench.stats.summary import summarize


def _call(ttft: float | None, duration: float, tokens: int, status: str = "ok") -> Step:
    return Step("model", "m", 0.0, duration, ttft=ttft, tokens_out=tokens, status=status,
                wait=0.0)  # type: ignore[arg-type]  # fmt: skip


def _task(i: int, steps: list[Step], status: str = "ok", latency: float = 1.0) -> Sample:
    return Sample("measured", 0, f"c{i}", 0, "en", float(i), float(i) + latency,
                  status=status, steps=steps, model_calls=len(steps))  # type: ignore[arg-type]  # fmt: skip


def test_objectives_parse_and_bad_ones_name_the_term() -> None:
    slo = goodput.parse("ttft<500ms, tpot<=50ms,latency<2s")
    assert slo.limits == (("ttft", 0.5), ("tpot", 0.05), ("latency", 2.0))
    for text, said in (("tft<1s", "'tft' is not one of"), ("ttft>1s", "is not METRIC<LIMIT"),
                       ("ttft<0", "must be above 0"), (" , ", "give objectives")):  # fmt: skip
        with pytest.raises(GateError, match=said):
            goodput.parse(text)


def test_tpot_is_the_time_per_token_after_the_first() -> None:
    figures = goodput.request_figures(_call(ttft=0.1, duration=0.6, tokens=11))
    assert figures["tpot"] == pytest.approx(0.05) and figures["e2e"] == pytest.approx(0.6)
    assert goodput.request_figures(_call(ttft=0.1, duration=0.6, tokens=1))["tpot"] is None
    assert goodput.request_figures(_call(ttft=None, duration=0.6, tokens=11))["tpot"] is None


def test_goodput_counts_requests_and_tasks_and_failures_miss() -> None:
    fast, slow = _call(0.1, 0.6, 11), _call(0.9, 1.4, 11)  # TTFT 100 ms vs 900 ms
    samples = [
        _task(0, [fast, fast]),  # both requests meet: the task meets
        _task(1, [fast, slow]),  # one request misses: the task misses
        _task(2, [fast, _call(None, 0.5, 0, "error")], status="error"),  # failed: misses
        _task(3, [_call(None, 0.01, 0, "rate_limited")], status="rate_limited"),  # refused
        _task(4, [_call(None, 0.6, 11)]),  # not streamed: no TTFT to show it met the limit
    ]
    slo = goodput.parse("ttft<500ms,tpot<60ms")
    overall = summarize(samples, {}, slo)["runs"][0]["overall"]
    assert overall["requests"] == 8 and overall["request_error_rate"] == pytest.approx(2 / 8)
    good = overall["goodput"]
    assert (good["tasks"], good["requests"]) == (1, 4)  # c0's two, c1's and c2's fast one
    assert good["task_share"] == pytest.approx(1 / 5)
    assert good["request_share"] == pytest.approx(4 / 8)
    window = summarize(samples, {}, slo)["runs"][0]["window"]
    assert good["task_rate"] == pytest.approx(1 / window)
    assert overall["tpot"]["n"] == 5  # ok requests with a TTFT and 2+ tokens
    assert "goodput" not in summarize(samples, {})["runs"][0]["overall"]  # only with --slo


def test_a_task_latency_objective_applies_to_the_task() -> None:
    samples = [
        _task(0, [_call(0.1, 0.6, 11)], latency=1.0),
        _task(1, [_call(0.1, 0.6, 11)], latency=3.0),
    ]
    good = summarize(samples, {}, goodput.parse("latency<2s"))["pooled"]["overall"]["goodput"]
    assert (good["tasks"], good["requests"]) == (1, 2)  # a request has no task latency
