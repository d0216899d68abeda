"""Token timing on a model call: from the moment the transport saw the bytes, when it knows."""

from __future__ import annotations

import time

import pytest

from perfbench.suite import Case
from perfbench.task import Task


class Ticks:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def task(clock: object) -> Task:
    case = Case(id="c", language="en", input="hi")
    return Task(case, "measured", 0, 0, 0, clock, t0=0.0)  # type: ignore[arg-type]


def test_tokens_are_timed_from_the_chunks_arrival_not_from_when_they_are_parsed() -> None:
    clock = Ticks()
    t = task(clock)
    call = t.model_call("m")
    clock.now = 100.5
    call.sent()
    clock.now = 100.8
    call.arrived()  # no transport stamp: now
    clock.now = 100.9  # parsing took 0.1 s
    call.token()
    call.token()
    assert t.steps[0].ttft == pytest.approx(0.3)
    assert list(t._gaps) == [0.0]  # two tokens of one chunk arrived together


def test_a_transport_stamp_on_the_monotonic_clock_is_used_within_sent_and_now() -> None:
    t = task(time.monotonic)
    call = t.model_call("m")
    call.sent()
    sent = t.steps[0].start + (t.steps[0].wait or 0.0)
    time.sleep(0.002)  # the task gets to bytes that came 1.5 ms ago
    call.arrived(sent + 0.0005)
    call.token()
    assert t.steps[0].ttft == pytest.approx(0.0005, abs=1e-9)
    call.arrived(sent - 1.0)  # impossible: before the request left (and the last token)
    call.token()
    assert list(t._gaps) == [0.0]  # clamped: no negative gap
    call.arrived(time.monotonic() + 60)  # from the future: clamped to now
    call.token()
    assert 0.0 <= t._gaps[1] < 1.0


def test_a_stamp_is_ignored_when_the_task_measures_on_another_clock() -> None:
    clock = Ticks()
    t = task(clock)
    call = t.model_call("m")
    call.sent()
    clock.now = 100.25
    call.arrived(time.monotonic())  # another timebase: meaningless here
    call.token()
    assert t.steps[0].ttft == pytest.approx(0.25)


def test_a_call_ends_when_its_last_bytes_arrived_and_a_failed_one_when_it_failed() -> None:
    clock = Ticks()
    t = task(clock)
    call = t.model_call("m")
    call.sent()
    clock.now = 100.5
    call.arrived()  # the reply's last bytes
    clock.now = 100.7  # tokenizing, bookkeeping: not the model's time
    call.finish(tokens_in=1, tokens_out=1)
    assert t.steps[0].duration == pytest.approx(0.5)

    failed = t.model_call("m")
    failed.sent()
    failed.arrived()
    clock.now = 101.0
    failed.finish(tokens_in=None, tokens_out=None, status="error")
    assert t.steps[1].duration == pytest.approx(0.3)  # from 100.7 to the failure


def test_the_wait_before_sending_counts_each_attempt_not_the_backoff_between_them() -> None:
    """A retried call waited for a connection twice (0.2 s, then 0.05 s); the 2 s it slept
    because the server said 429 is not a wait on the client, and the warning about slow
    connections must not fire on it."""
    clock = Ticks()
    t = task(clock)
    call = t.model_call("m")
    clock.now = 100.2
    call.sent()  # refused: 429, retry after 2 s
    clock.now = 102.2
    call.attempt()
    clock.now = 102.25
    call.sent()
    clock.now = 102.5
    call.arrived()
    call.token()
    assert t.steps[0].wait == pytest.approx(0.25)
    assert t.steps[0].ttft == pytest.approx(0.25)  # from the request that was answered
