"""stats/breakdown.py: a task's time split from its steps (overlapping model calls counted
once on the critical path, the client's wait apart, the rest the agent's own), success beyond
completion (expect), cost per successful task, and which part moved between two sides."""

from __future__ import annotations

import pytest

from perfbench.sample import Sample, Step
from perfbench.stats.breakdown import Breakdown, moved, split
from perfbench.stats.summary import summarize


def task(steps: list[Step], end: float = 2.0, **fields: object) -> Sample:
    return Sample("measured", 0, "c", 0, "en", 0.0, end, steps=steps, **fields)  # type: ignore[arg-type]


def test_overlapping_model_calls_count_once_and_waits_are_the_clients() -> None:
    s = task([
        Step("model", "chat", start=0.2, duration=0.5, wait=0.1),   # model 0.3..0.7
        Step("model", "chat", start=0.5, duration=0.5),             # model 0.5..1.0, overlaps
        Step("tool", "search", start=1.0, duration=0.25),
    ])  # fmt: skip
    parts = split(s)
    assert parts["model"] == pytest.approx(0.7)  # 0.3..1.0, the overlap once
    assert parts["model_sum"] == pytest.approx(0.9)  # 0.4 + 0.5
    assert parts["client"] == pytest.approx(0.1)
    assert parts["tool"] == pytest.approx(0.25)
    # Outside every step (0..0.2 and 1.25..2.0): the agent's own time.
    assert parts["agent"] == pytest.approx(0.95)


def test_success_needs_the_expected_outcome_and_a_success_pays_for_the_failures() -> None:
    b = Breakdown()
    b.add(task([], cost=0.01, expect_ok=True))
    b.add(task([], cost=0.01, expect_ok=False))  # completed, but not as the case expects
    b.add(task([], cost=0.01, status="error", error_kind="http_500"))
    b.add(task([], cost=0.01))  # no expect: completion is success
    done = b.finish()["success"]
    assert done["tasks"] == 2 and done["rate"] == pytest.approx(0.5)
    assert done["cost_per_success"] == pytest.approx(0.02)  # 4 tasks' cost over 2 successes
    assert done["latency"]["n"] == 2


def test_cost_per_success_needs_every_task_priced() -> None:
    b = Breakdown()
    b.add(task([], cost=0.01))
    b.add(task([]))
    assert b.finish()["success"]["cost_per_success"] is None


def test_summary_scopes_carry_the_split_and_success() -> None:
    call = Step("model", "chat", start=0.5, duration=1.0)
    samples = [task([call]), task([call], expect_ok=False)]
    samples[1].iteration = 1
    overall = summarize(samples, {"c": 60})["runs"][0]["overall"]
    assert overall["time_split"]["agent"]["p50"] == pytest.approx(1.0)
    assert overall["time_split"]["model"]["p50"] == pytest.approx(1.0)
    assert overall["success"]["rate"] == pytest.approx(0.5)


def _runs(agent: float, model: float) -> list[dict[str, object]]:
    parts = {"agent": agent, "model": model, "tool": 0.0, "client": 0.001}
    return [{"time_split": {k: {"mean": v} for k, v in parts.items()}}] * 3


def test_moved_names_the_part_that_carries_the_change() -> None:
    said = moved(_runs(0.3, 0.6), _runs(0.9, 0.6))
    assert said == "mean +600 ms a task, all of it the agent's own time (+600 ms)"
    assert "model time" in (moved(_runs(0.3, 0.6), _runs(0.35, 0.9)) or "")
    assert moved(_runs(0.3, 0.6), _runs(0.3, 0.6)) is None
    assert moved([{"overall": {}}], _runs(0.3, 0.6)) is None  # an older summary: nothing said


def _side(expected: list[bool]) -> dict[str, object]:
    samples = []
    for run in range(5):
        for i, ok in enumerate(expected):
            s = task([Step("model", "chat", start=0.1, duration=0.5)], expect_ok=ok)
            s.run, s.iteration = run, i
            samples.append(s)
    return dict(summarize(samples, {"c": 60}))


def test_compare_gates_the_success_rate_and_a_threshold_reads_it() -> None:
    from perfbench.stats.compare import Rules, compare
    from perfbench.stats.thresholds import check_thresholds, parse_threshold

    base, cand = _side([True] * 4), _side([True, True, False, False])
    rows = {r.metric: r for r in compare(base, cand, Rules()).rows if r.scope == "overall"}
    assert rows["success_rate"].gated and rows["success_rate"].verdict == "regression"
    assert rows["error_rate"].verdict == "pass"  # every task completed: only success fell
    (result,) = check_thresholds(cand, [parse_threshold("success_rate>=90%")])
    assert result.value == pytest.approx(0.5) and not result.ok


def test_the_one_pass_split_equals_the_sorting_one_on_random_tasks() -> None:
    import random

    from perfbench.stats.breakdown import _sorted_parts, split_tuple

    rng = random.Random(7)
    for _ in range(2000):
        steps, at = [], 0.0
        for _ in range(rng.randint(0, 6)):
            at += rng.choice([0.0, rng.uniform(0, 0.3)])  # some start together (overlap)
            kind = rng.choice(["model", "model", "tool", "agent"])
            wait = rng.choice([None, 0.0, rng.uniform(0, 0.2)]) if kind == "model" else None
            steps.append(Step(kind, "x", start=at, duration=rng.uniform(0, 0.5), wait=wait))
        if rng.random() < 0.2:
            rng.shuffle(steps)  # out of order: the sorting path
        s = task(steps, end=at + 1.0)
        assert split_tuple(s) == pytest.approx(_sorted_parts(s), abs=1e-12)
