"""The runner and the in-process mock agent under virtual time: exact latencies, determinism,
failures as data, cancellation."""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from perfbench.engine.runner import Runner, task_keys
from perfbench.engine.share import Share
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Recorder
from perfbench.suite import Suite, load_suite
from perfbench.targets import Target
from perfbench.targets.mock import MockAgent
from perfbench.task import Task
from tests.helpers import fixed_profile, write_suite

pytestmark = pytest.mark.anyio

SUITE = """
cases:
  - id: chat
    language: en
    input: Hello there
  - id: tool
    language: en
    input: Look it up
    tools:
      - name: lookup
        result: found it
        latency_ms: 100
    expect: {tool_calls: [lookup]}
"""


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite([write_suite(tmp_path / "s.yaml", SUITE)])


class Collect:
    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def __call__(self, sample: Sample) -> None:
        self.samples.append(sample)


def make(suite: Suite, target: object, plan: Plan) -> tuple[Runner, Collect, Summarizer]:
    collect = Collect()
    summarizer = Summarizer({c.id: c.timeout_s for c in suite.cases})
    recorder = Recorder(summarizer, observers=[collect])
    return Runner(suite, target, plan, recorder), collect, summarizer  # type: ignore[arg-type]


async def test_fixed_profile_gives_exact_latencies_and_percentiles(suite: Suite) -> None:
    runner, got, summarizer = make(
        suite, MockAgent(fixed_profile()), Plan(runs=3, warmup=1, concurrency=2)
    )
    outcome = await runner.run()
    assert not outcome.interrupted
    assert len(got.samples) == 8
    measured = [s for s in got.samples if s.phase == "measured"]
    chat = [s for s in measured if s.case == "chat"]
    tool = [s for s in measured if s.case == "tool"]
    for s in chat:
        # TTFT 300 ms, then 9 more tokens 10 ms apart.
        assert s.latency == pytest.approx(0.390, abs=1e-9)
        assert s.ttft == pytest.approx(0.300, abs=1e-9)
        assert s.ttfo == pytest.approx(0.300, abs=1e-9)
        assert s.itl_mean == pytest.approx(0.010, abs=1e-9)
        assert (s.model_calls, s.tool_calls, s.tokens_out) == (1, 0, 10)
    for s in tool:
        # tool call (one token, `{}`): 300 ms; tool 100 ms; answer: 300 + 9 × 10 ms.
        assert s.latency == pytest.approx(0.790, abs=1e-9)
        assert s.ttft == pytest.approx(0.300, abs=1e-9)
        assert s.ttfo == pytest.approx(0.700, abs=1e-9)
        assert [st.kind for st in s.steps] == ["model", "tool", "model"]
        assert s.steps[1].duration == pytest.approx(0.100, abs=1e-9)
        assert (s.model_calls, s.tool_calls, s.tokens_out, s.expect_ok) == (2, 1, 11, True)
    summary = summarizer.finish()
    assert summary["warmup_tasks"] == 2
    assert len(summary["runs"]) == 3
    run0 = summary["runs"][0]
    assert run0["overall"]["tasks"] == 2 and run0["overall"]["ok"] == 2
    lat = run0["overall"]["latency"]
    assert lat["p50"] == pytest.approx(0.390, abs=1e-9)
    assert lat["p95"] == pytest.approx(0.790, abs=1e-9)
    assert lat["mean"] == pytest.approx(0.590, abs=1e-9)
    # Both tasks start together at concurrency 2: the window is the longer task.
    assert run0["overall"]["throughput"] == pytest.approx(2 / 0.790, rel=1e-9)
    pooled = summary["pooled"]["cases"]["tool"]["latency"]
    assert pooled["n"] == 3 and pooled["stddev"] == pytest.approx(0.0, abs=1e-9)
    assert summary["across_runs"]["overall"]["latency.p95"]["median"] == pytest.approx(0.790)


async def test_a_pass_takes_the_cases_round_by_round(suite: Suite) -> None:
    """Each case once, then each again: the mix in flight is the suite's all through a pass
    (case by case, two tasks in flight would be both "chat", then both "tool"), and a pass
    cut short has measured every case."""
    runner, got, _ = make(
        suite, MockAgent(fixed_profile()), Plan(runs=1, warmup=0, repeat=3, concurrency=2)
    )
    await runner.run()
    started = sorted(got.samples, key=lambda s: s.start)
    assert [(s.case, s.iteration) for s in started[:4]] == [
        ("chat", 0), ("tool", 0), ("chat", 1), ("tool", 1)
    ]  # fmt: skip
    assert {s.start for s in started[:2]} == {0.0}  # in flight together: one of each


def durations(samples: list[Sample]) -> dict[tuple[str, int, str, int], tuple[object, ...]]:
    return {
        s.key: (
            round(s.latency, 9),
            s.ttft and round(s.ttft, 9),
            s.itl_mean and round(s.itl_mean, 9),
            s.tokens_in,
            s.tokens_out,
            tuple(round(st.duration, 9) for st in s.steps),
        )
        for s in samples
    }


async def test_same_seed_same_samples_at_concurrency_1_and_8(example_suite: Suite) -> None:
    from perfbench.mock.profile import load_profile

    agent = MockAgent(load_profile("default"))
    plan = Plan(runs=2, warmup=1, repeat=2, seed=42)
    one, got1, _ = make(example_suite, agent, plan)
    eight, got8, _ = make(
        example_suite, agent, Plan(runs=2, warmup=1, repeat=2, seed=42, concurrency=8)
    )
    await one.run()
    await eight.run()
    assert set(durations(got1.samples)) == set(task_keys(example_suite, plan))
    assert durations(got1.samples) == durations(got8.samples)
    assert {s.concurrency for s in got8.samples} > {1}
    other, got_other, _ = make(example_suite, agent, Plan(runs=2, warmup=1, repeat=2, seed=43))
    await other.run()
    assert durations(got_other.samples) != durations(got1.samples)


async def test_timeout_becomes_a_sample_and_keeps_its_steps(tmp_path: Path) -> None:
    suite = load_suite(
        [
            write_suite(
                tmp_path / "s.yaml",
                SUITE.replace("latency_ms: 100", "latency_ms: 5000").replace(
                    "expect:", "timeout_s: 1.0\n    expect:"
                ),
            )
        ]
    )
    runner, got, summarizer = make(suite, MockAgent(fixed_profile()), Plan(runs=1, warmup=0))
    await runner.run()
    by_case = {s.case: s for s in got.samples}
    assert by_case["chat"].status == "ok"
    slow = by_case["tool"]
    assert slow.status == "timeout" and slow.error_kind == "timeout"
    assert slow.latency == pytest.approx(1.0, abs=1e-9)
    assert [st.kind for st in slow.steps] == ["model", "tool"]
    overall = summarizer.finish()["runs"][0]["overall"]
    assert (overall["ok"], overall["timeout"], overall["error_rate"]) == (1, 1, 0.5)
    # Failures count at their timeout in latency_all, never faster.
    assert overall["latency_all"]["max"] == pytest.approx(1.0, abs=1e-9)


class Exploding(Target):
    name = "exploding"

    async def run(self, task: Task) -> Sample:
        await anyio.sleep(0.05)
        if task.case.id == "tool":
            raise RuntimeError("boom")
        return task.sample("ok")


async def test_a_target_exception_fails_one_task_not_the_run(suite: Suite) -> None:
    runner, got, _ = make(suite, Exploding(), Plan(runs=2, warmup=0, concurrency=2))
    outcome = await runner.run()
    assert not outcome.interrupted
    statuses = sorted((s.case, s.status, s.error_kind) for s in got.samples)
    assert statuses == [
        ("chat", "ok", None),
        ("chat", "ok", None),
        ("tool", "error", "unhandled:RuntimeError"),
        ("tool", "error", "unhandled:RuntimeError"),
    ]


async def test_stop_records_in_flight_tasks_as_cancelled(suite: Suite) -> None:
    runner, got, summarizer = make(
        suite, MockAgent(fixed_profile()), Plan(runs=5, warmup=0, concurrency=2)
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run)
        await anyio.sleep(0.5)  # first pass: chat done at 0.39 s, tool still in flight
        runner.stop()
    assert [(s.case, s.status) for s in got.samples] == [("chat", "ok"), ("tool", "cancelled")]
    summary = summarizer.finish()
    overall = summary["runs"][0]["overall"]
    assert (overall["tasks"], overall["cancelled"]) == (1, 1)


async def test_stop_before_start_runs_nothing(suite: Suite) -> None:
    runner, got, _ = make(suite, MockAgent(fixed_profile()), Plan(runs=1, warmup=0))
    runner.stop()
    outcome = await runner.run()
    assert outcome.interrupted and got.samples == []


async def test_a_timeout_closes_the_model_call_it_interrupted(tmp_path: Path) -> None:
    suite = load_suite(
        [
            write_suite(
                tmp_path / "s.yaml",
                SUITE.replace(
                    "  - id: chat\n    language: en\n    input: Hello there\n", ""
                ).replace("expect:", "timeout_s: 0.5\n    expect:"),
            )
        ]
    )
    slow = fixed_profile(ttft_ms=2000)  # the first model call cannot finish in 0.5 s
    runner, got, _ = make(suite, MockAgent(slow), Plan(runs=1, warmup=0))
    await runner.run()
    [sample] = got.samples
    [step] = sample.steps
    assert sample.status == "timeout"
    assert (step.kind, step.status) == ("model", "timeout")
    assert step.duration == pytest.approx(0.5, abs=1e-9)


async def test_failures_are_summarised_by_kind_with_an_example(suite: Suite) -> None:
    runner, _, summarizer = make(suite, Exploding(), Plan(runs=2, warmup=0))
    await runner.run()
    summary = summarizer.finish()
    assert summary["pooled"]["overall"]["failures"] == {
        "unhandled:RuntimeError": {"count": 2, "example": "boom"}
    }
    assert summary["runs"][0]["overall"]["failures"]["unhandled:RuntimeError"]["count"] == 1


async def test_ramp_up_starts_the_slots_evenly_and_keeps_them_apart(suite: Suite) -> None:
    # 4 slots over 0.4 s: slots start at 0, 0.1, 0.2, 0.3 s; every chat task lasts 0.390 s,
    # so each slot's next task starts where its last ended and the slots stay 0.1 s apart.
    plan = Plan(runs=1, warmup=0, repeat=8, concurrency=4, ramp_up=0.4)
    chat = replace(suite, cases=tuple(c for c in suite.cases if c.id == "chat"))
    runner, got, _ = make(chat, MockAgent(fixed_profile()), plan)
    await runner.run()
    starts = sorted(round(s.start, 6) for s in got.samples)
    assert starts == [0.0, 0.1, 0.2, 0.3, 0.39, 0.49, 0.59, 0.69]
    assert [s.concurrency for s in sorted(got.samples, key=lambda s: s.start)][:4] == [1, 2, 3, 4]


async def test_without_a_ramp_every_slot_starts_at_once(suite: Suite) -> None:
    plan = Plan(runs=1, warmup=0, repeat=8, concurrency=4, ramp_up=0)
    chat = replace(suite, cases=tuple(c for c in suite.cases if c.id == "chat"))
    runner, got, _ = make(chat, MockAgent(fixed_profile()), plan)
    await runner.run()
    assert sorted(round(s.start, 6) for s in got.samples) == [0.0] * 4 + [0.39] * 4


async def test_a_worker_process_ramps_its_own_slots_interleaved_with_the_others(
    suite: Suite,
) -> None:
    # Worker 1 of 2 holds global slots 1 and 3 of 4: over 0.4 s they start at 0.1 and 0.3 s.
    plan = Plan(runs=1, warmup=0, repeat=4, concurrency=4, ramp_up=0.4, workers=2)
    chat = replace(suite, cases=tuple(c for c in suite.cases if c.id == "chat"))
    collect = Collect()
    summarizer = Summarizer({c.id: c.timeout_s for c in chat.cases})
    recorder = Recorder(summarizer, observers=[collect])
    runner = Runner(chat, MockAgent(fixed_profile()), plan, recorder, share=Share(1, 2), origin=0.0)
    await runner.run()
    assert sorted(round(s.start, 6) for s in collect.samples) == [0.1, 0.3]


@pytest.mark.parametrize("open_loop", [False, True], ids=["closed", "open"])
async def test_two_workers_share_every_task_once_and_each_runs_every_case(
    suite: Suite, open_loop: bool
) -> None:
    """Dealt by a task's place in the pass (round by round: chat, tool, chat, tool…), one of
    two workers would run only "chat" and the other only "tool": unequal shares of the work."""
    from perfbench.load import Rate

    load = Rate(per_second=10) if open_loop else None
    plan = Plan(runs=1, warmup=0, repeat=4, concurrency=2, workers=2, load=load)
    mine: list[set[tuple[str, int]]] = []
    for at in (0, 1):
        collect = Collect()
        recorder = Recorder(
            Summarizer({c.id: c.timeout_s for c in suite.cases}), observers=[collect]
        )
        agent = MockAgent(fixed_profile())
        await Runner(suite, agent, plan, recorder, share=Share(at, 2), origin=0.0).run()
        mine.append({(s.case, s.iteration) for s in collect.samples})
    assert mine[0].isdisjoint(mine[1])
    assert mine[0] | mine[1] == {(c, i) for c in ("chat", "tool") for i in range(4)}
    assert [{c for c, _ in tasks} for tasks in mine] == [{"chat", "tool"}] * 2
    assert len(mine[0]) == len(mine[1]) == 4


def test_auto_ramp_is_one_slot_per_millisecond_per_worker_and_closed_loops_only() -> None:
    from perfbench.load import Rate

    assert Plan(concurrency=256, ramp_up=None).ramp_seconds() == pytest.approx(0.256)
    assert Plan(concurrency=256, ramp_up=None, workers=2).ramp_seconds() == pytest.approx(0.128)
    assert Plan(concurrency=1, ramp_up=None).ramp_seconds() == 0
    assert Plan(concurrency=8, ramp_up=None, load=Rate(per_second=5)).ramp_seconds() == 0
    assert Plan(concurrency=256, ramp_up=1.5).ramp_seconds() == 1.5


class Littering(Target):
    """A target that leaves a reference cycle of 21 objects behind per task, and notes the
    collector's state while it runs."""

    def __init__(self, inner: MockAgent) -> None:
        self.inner = inner
        self.young: list[int] = []
        self.collector_on: set[bool] = set()

    async def run(self, task: Task) -> Sample:
        cycle: list[object] = [[] for _ in range(20)]
        cycle.append(cycle)
        self.young.append(gc.get_count()[0])
        self.collector_on.add(gc.isenabled())
        return await self.inner.run(task)


async def test_the_collector_is_off_while_measuring_and_a_littering_target_is_still_collected(
    suite: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfbench.engine.collector import Collector

    monkeypatch.setattr(Collector, "VALVE", 5_000)
    chat = replace(suite, cases=tuple(c for c in suite.cases if c.id == "chat"))
    target = Littering(MockAgent(fixed_profile(ttft_ms=0, itl_ms=0)))
    runner, got, _ = make(chat, target, Plan(runs=1, warmup=0, repeat=10_000, concurrency=4))
    assert gc.isenabled()
    await runner.run()
    assert len(got.samples) == 10_000
    assert target.collector_on == {False}  # off for every task…
    assert gc.isenabled()  # …and on again after the run
    # 21 objects a task, 210,000 in all: the valve (checked every 1,024 tasks) kept the young
    # generation under ~10k (at the start) + 1,024 tasks × ~25; without it, it reached 260k.
    assert max(target.young) < 60_000


@pytest.mark.parametrize(("repeat", "prepared"), [(4, False), (5, True)])
async def test_numpy_is_imported_before_a_pass_that_takes_a_histogram_past_its_exact_values(
    suite: Suite, monkeypatch: pytest.MonkeyPatch, repeat: int, prepared: bool
) -> None:
    # Past its exact values a histogram records in batches with numpy: imported mid-pass, it
    # would hold the loop ~50 ms with tasks in flight, so the runner imports it first.
    from perfbench.stats import histogram

    calls: list[int] = []
    monkeypatch.setattr(histogram, "EXACT", 4)
    monkeypatch.setattr(histogram, "prepare", lambda: calls.append(len(collect.samples)))
    runner, collect, _ = make(
        suite, MockAgent(fixed_profile()), Plan(runs=1, warmup=0, repeat=repeat, concurrency=2)
    )
    with anyio.fail_after(600):
        await runner.run()
    assert calls == ([0] if prepared else [])  # before the first sample
