"""The client-side wait of model calls (start → request out) in summary.json, and its warning."""

from __future__ import annotations

import pytest

from perfbench.sample import Sample, Step
from perfbench.stats.advice import advise
from perfbench.stats.summary import summarize


def sample(i: int, waits: list[float]) -> Sample:
    steps = [Step("model", "m", start=0.0, duration=0.5, wait=w) for w in waits]
    steps.append(Step("tool", "t", start=0.5, duration=0.1))  # no request: no wait
    return Sample("measured", 0, "c", i, "en", start=0.0, end=1.0, steps=steps)


def test_every_model_calls_wait_is_counted_and_tool_calls_are_not() -> None:
    samples = [sample(0, [0.001, 0.003]), sample(1, [0.002]), sample(2, [0.010, 0.004])]
    summary = summarize(samples, {"c": 60.0})
    wait = summary["runs"][0]["overall"]["wait"]
    assert wait["n"] == 5
    assert (wait["min"], wait["p50"], wait["max"]) == pytest.approx((0.001, 0.003, 0.010))
    assert summary["pooled"]["overall"]["wait"]["n"] == 5


def test_a_long_wait_is_a_warning_that_says_what_to_do() -> None:
    waited = summarize([sample(i, [0.02]) for i in range(20)], {"c": 60.0})
    notes = [n for n in advise(waited, {}) if "before their request went out" in n]
    assert len(notes) == 1 and "20.0 ms at P95" in notes[0]
    quick = summarize([sample(i, [0.0002]) for i in range(20)], {"c": 60.0})
    assert not [n for n in advise(quick, {}) if "before their request went out" in n]
