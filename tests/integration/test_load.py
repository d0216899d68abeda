"""Load shapes under virtual time: AIMD convergence on a concurrency limit, open-loop arrivals
with coordinated-omission correction, dropped tasks, reproducible Poisson schedules."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import anyio
import httpx
import pytest

from perfbench.apis.openai_chat import OpenAIChat
from perfbench.engine.runner import Runner
from perfbench.load import Adaptive, Rate
from perfbench.load.aimd import Aimd
from perfbench.load.arrivals import schedule
from perfbench.report.adaptive import adaptive_line
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Recorder
from perfbench.suite import Suite, load_suite
from perfbench.targets import Target
from perfbench.targets.agent_loop import ModelAgent
from perfbench.targets.mock import MockAgent
from perfbench.task import Task
from tests.helpers import fixed_profile, write_suite

ONE = "cases:\n  - {id: c, language: en, input: hello, timeout_s: 30}\n"


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite([write_suite(tmp_path / "s.yaml", ONE)])


def run(suite: Suite, target: object, plan: Plan) -> tuple[Runner, list[Sample], dict]:  # type: ignore[type-arg]
    samples: list[Sample] = []
    summarizer = Summarizer({"c": 30.0})
    runner = Runner(suite, target, plan, Recorder(summarizer, observers=[samples.append]))  # type: ignore[arg-type]
    return runner, samples, summarizer  # type: ignore[return-value]


@pytest.mark.anyio
async def test_adaptive_converges_under_a_concurrency_limit_of_12(suite: Suite) -> None:
    agent = MockAgent(fixed_profile(rate_limits={"concurrent": 12}))
    shape = Adaptive(start=1, maximum=64, decrease=0.8, cooldown_s=1.0)
    runner, samples, _ = run(suite, agent, Plan(runs=1, warmup=0, repeat=3000, load=shape))
    await runner.run()
    aimd = runner.aimd
    assert aimd is not None
    limits = [limit for _, limit in aimd.history]
    assert limits[:4] == [1, 2, 4, 8]  # slow start doubles until the first 429s
    converged = aimd.converged()
    assert converged is not None and 9 <= converged <= 12.5, limits
    late = [limit for t, limit in aimd.history if t > aimd.history[-1][0] / 2]
    assert min(late) >= 9 and max(late) <= 13, late  # stays there: a sawtooth 10..13
    assert sum(s.status == "rate_limited" for s in samples) < 0.05 * len(samples)


@pytest.mark.anyio
async def test_adaptive_names_a_requests_per_minute_window_and_never_converges_on_it(
    suite: Suite,
) -> None:
    """The built-in `rate-limited` profile (120 requests/min) read "converged limit 1.0": 429s
    come with one task in flight, so the limit is a window, not a concurrency."""
    fast = {"ttft_ms": 20, "itl_ms": 1}  # one task at a time asks for over 2 requests a second
    agent = MockAgent(fixed_profile(**fast, rate_limits={"requests_per_minute": 120, "burst_s": 2}))
    shape = Adaptive(start=1, maximum=32)
    runner, _, summarizer = run(suite, agent, Plan(runs=1, warmup=0, repeat=400, load=shape))
    await runner.run()
    aimd = runner.aimd
    assert aimd is not None and len(aimd.episodes) >= 3, aimd.history
    assert aimd.window() == "budget" and aimd.converged() is None
    summary = summarizer.finish()  # type: ignore[attr-defined]
    summary["adaptive"] = aimd.reading()
    line = adaptive_line(summary)
    assert line is not None and "rate window" in line and "converged" not in line, line
    admitted = float(line.split(" requests/min")[0].rsplit(" ", 1)[1].replace(",", ""))
    assert 110 <= admitted <= 135, line  # the profile's 120 a minute, and its 2 s of burst


def test_one_rate_limit_episode_is_not_convergence() -> None:
    """A gateway at 60 requests/min: one episode averaged over slow start read "converged
    limit 21.4". Three episodes at limits within 25 % are the rule."""
    aimd = Aimd(Adaptive(start=1, maximum=64, decrease=0.5, cooldown_s=1.0))
    for t, limit in enumerate((2, 4, 8, 16, 32)):
        aimd._set(limit, float(t))
    aimd.refused(5.0, None)  # one episode at 32
    assert aimd.mean_limit() is not None and aimd.converged() is None
    for t in (10.0, 20.0):  # the sawtooth's next peaks: 20, then 5 (not bounded)
        aimd._set(20 if t == 10.0 else 5, t - 1)
        aimd.refused(t, None)
    assert aimd.converged() is None
    aimd._set(6, 29.0)
    aimd.refused(30.0, None)
    aimd._set(6, 39.0)
    aimd.refused(40.0, None)  # the last three at 5, 6, 6
    assert [limit for _, limit in aimd.episodes][-3:] == [5, 6, 6]
    assert aimd.converged() is not None and aimd.window() is None


def test_aimd_other_failures_pause_growth_without_decreasing() -> None:
    aimd = Aimd(Adaptive(start=4, maximum=64))
    ok = [Sample("measured", 0, "c", i, "en", start=1.0, end=2.0) for i in range(3)]
    bad = Sample("measured", 0, "c", 9, "en", start=1.0, end=2.0, status="error")
    for s in ok:
        aimd.observe(s)
    aimd.observe(bad)  # resets the round: no growth yet
    assert aimd.limit == 4
    for s in [*ok, ok[0]]:
        aimd.observe(s)
    assert aimd.limit == 8  # a clean round of 4 doubles it (slow start)


class StallOnce(Target):
    """Answers in 10 ms, except the fifth task, which the server holds for 2 s."""

    name = "stall-once"

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, task: Task) -> Sample:
        self.calls += 1
        await anyio.sleep(2.0 if self.calls == 5 else 0.010)
        return task.sample("ok")


@pytest.mark.anyio
async def test_open_loop_shows_the_stall_in_the_corrected_tail_only(suite: Suite) -> None:
    shape = Rate(per_second=100, duration_s=10)  # 1,000 tasks, one every 10 ms
    runner, samples, summarizer = run(suite, StallOnce(), Plan(runs=1, warmup=0, load=shape))
    await runner.run()
    assert len(samples) == 1000
    # A server stalls for one task only; the open loop keeps sending on schedule...
    assert max(s.start - (s.scheduled or 0) for s in samples) < 1e-9
    overall = summarizer.finish()["runs"][0]["overall"]  # type: ignore[attr-defined]
    # ...so from the actual start only the stalled task is slow,
    assert overall["latency"]["p99"] == pytest.approx(0.010, abs=1e-9)
    assert overall["latency"]["max"] == pytest.approx(2.0, abs=1e-9)
    # and latency from the intended start is the same here (no queueing in an open loop with
    # no cap). With a cap of 1 in flight, the tasks behind the stall wait: see the next test.
    assert overall["latency_intended"]["p99"] == pytest.approx(0.010, abs=1e-9)


@pytest.mark.anyio
async def test_closed_queue_behind_a_stall_is_corrected_from_the_schedule(suite: Suite) -> None:
    """A client that can only have one request in flight (max_in_flight 1) and must not drop:
    modelled as a rate that the target answers one at a time. Tasks queued behind the stall
    start late; their latency from the intended start includes the wait (wrk2's correction),
    the uncorrected latency does not."""

    class OneAtATime(StallOnce):
        def __init__(self) -> None:
            super().__init__()
            self.lock = anyio.Lock()

        async def run(self, task: Task) -> Sample:
            async with self.lock:
                return await super().run(task)

    shape = Rate(per_second=100, duration_s=10)
    runner, samples, summarizer = run(suite, OneAtATime(), Plan(runs=1, warmup=0, load=shape))
    await runner.run()
    overall = summarizer.finish()["runs"][0]["overall"]  # type: ignore[attr-defined]
    affected = [s for s in samples if (s.latency_intended or 0) > 0.5]
    assert len(affected) > 100  # many tasks see the stall from their intended start
    assert overall["latency_intended"]["p99"] > 1.0
    assert overall["latency"]["p50"] < overall["latency_intended"]["p50"] + 1e-9


@pytest.mark.anyio
async def test_max_in_flight_drops_and_counts(suite: Suite) -> None:
    shape = Rate(per_second=100, duration_s=1, max_in_flight=2)
    runner, samples, summarizer = run(suite, StallOnce(), Plan(runs=1, warmup=0, load=shape))
    await runner.run()
    overall = summarizer.finish()["runs"][0]["overall"]  # type: ignore[attr-defined]
    dropped = sum(s.status == "dropped" for s in samples)
    assert dropped == overall["dropped"] > 0
    assert overall["tasks"] == len(samples) - dropped


def test_poisson_schedule_is_seeded_and_exponential() -> None:
    a = schedule(50.0, "poisson", 2000, "seed-1")
    assert a == schedule(50.0, "poisson", 2000, "seed-1")
    assert a != schedule(50.0, "poisson", 2000, "seed-2")
    gaps = sorted(b - x for x, b in itertools.pairwise(a))
    n = len(gaps)
    # Kolmogorov–Smirnov against Exp(50): D must stay under the 1% critical value.
    d = max(
        max((i + 1) / n - (1 - math.exp(-50 * g)), (1 - math.exp(-50 * g)) - i / n)
        for i, g in enumerate(gaps)
    )
    assert d < 1.63 / math.sqrt(n)
    assert abs(a[-1] / (n) - 1 / 50) < 0.1 / 50  # mean gap within 10%
    assert schedule(4.0, "constant", 3, "x") == [0.0, 0.25, 0.5]


class ConcurrencyLimited(httpx.AsyncBaseTransport):
    """A server that admits ``limit`` requests at once; above that: 429 + Retry-After: 1, as
    an LLM gateway does. Each admitted reply takes 100 ms (virtual time)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.in_flight, self.requests, self.refusals = limit, 0, 0, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.in_flight >= self.limit:
            self.refusals += 1
            return httpx.Response(429, headers={"retry-after": "1"}, text="busy")
        self.in_flight += 1
        try:
            await anyio.sleep(0.100)
        finally:
            self.in_flight -= 1
        body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1}}  # fmt: skip
        return httpx.Response(200, json=body)


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [4, 16])
async def test_adaptive_with_default_retries_converges_on_the_servers_limit(
    suite: Suite, limit: int
) -> None:
    """With in-task retries on (the default), the controller used to hear a 429 only when its
    task ended, after the backoff: meanwhile the others finished clean and slow start kept
    doubling (the limit converged at 19.7 against a server admitting 4). It hears each 429 as
    it arrives now, and the hold is the 429's own Retry-After."""
    server = ConcurrencyLimited(limit)
    agent = ModelAgent(OpenAIChat("m"), "http://test/v1", name="openai/m", stream=False,
                       transport=server, concurrency=64)  # fmt: skip
    shape = Adaptive(start=1, maximum=64)
    runner, samples, _ = run(suite, agent, Plan(runs=1, warmup=0, repeat=600, load=shape))
    try:
        await runner.run()
    finally:
        await agent.aclose()
    assert runner.aimd is not None
    converged = runner.aimd.converged()
    assert converged is not None and 0.75 * limit <= converged <= 1.25 * limit, runner.aimd.history
    # Every attempt a sample counts is a request the server saw.
    assert sum(1 + s.retries for s in samples) == server.requests
    assert sum(s.throttled for s in samples) == server.refusals


class RefusesOnceForever(httpx.AsyncBaseTransport):
    """The first request gets a 429 asking a wait no run can sit out; the rest are served."""

    def __init__(self, wait: str) -> None:
        self.wait, self.requests = wait, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.requests == 1:
            return httpx.Response(429, headers={"retry-after": self.wait}, text="busy")
        await anyio.sleep(0.100)
        body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1}}  # fmt: skip
        return httpx.Response(200, json=body)


@pytest.mark.anyio
@pytest.mark.parametrize("wait", ["999999999", "inf", "Wed, 21 Oct 2099 07:28:00 GMT"])
async def test_adaptive_holds_at_most_a_minute_on_a_429_asking_forever(
    suite: Suite, wait: str
) -> None:
    """One 429 with Retry-After 999999999, inf or a far date held every new task that long
    (1 of 20 tasks done after 45 s); the hold is capped as a retry's wait is (60 s)."""
    agent = ModelAgent(OpenAIChat("m"), "http://test/v1", name="openai/m", stream=False,
                       transport=RefusesOnceForever(wait), concurrency=8)  # fmt: skip
    plan = Plan(runs=1, warmup=0, repeat=20, load=Adaptive(start=4, maximum=8))
    runner, samples, _ = run(suite, agent, plan)
    try:
        with anyio.fail_after(3600):  # virtual: a hold without a cap never ends
            await runner.run()
    finally:
        await agent.aclose()
    assert len(samples) == 20
    assert sum(s.status == "ok" for s in samples) >= 19
    assert max(s.end for s in samples) < 60 + 30  # virtual seconds: one capped hold at most


def test_429s_with_one_task_in_flight_are_a_window_whatever_the_headers_said() -> None:
    aimd = Aimd(Adaptive(start=4, maximum=64, decrease=0.5, cooldown_s=1.0))
    for t in (1.0, 3.0, 5.0, 7.0):  # 4 -> 2 -> 1, then refused at 1, twice
        aimd.refused(t, None)
    assert [limit for _, limit in aimd.episodes] == [4, 2, 1, 1]
    assert aimd.window() == "one in flight" and aimd.converged() is None


def test_a_429_says_a_per_minute_budget_was_spent() -> None:
    from perfbench.apis.retry import window_spent

    assert window_spent({"X-RateLimit-Remaining-Requests": "0"})
    assert window_spent({"anthropic-ratelimit-tokens-remaining": "0"})
    assert not window_spent({"x-ratelimit-remaining-requests": "12", "retry-after": "1"})
    assert not window_spent({})
