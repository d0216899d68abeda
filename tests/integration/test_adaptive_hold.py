"""--adaptive against a server asking an absurd Retry-After (issue 35, item 8): an ask past
--max-retry-wait is refused as the task refuses it, so the hold is the cooldown alone (it
held every episode for 60 s: 3 tasks took 156 s against 35 s fixed); an ask within it is
held whole."""

from __future__ import annotations

from perfbench.engine.session import Session
from perfbench.load import Adaptive
from perfbench.load.aimd import Aimd
from perfbench.spec import Plan, RunSpec, TargetSpec
from tests.helpers import CASES

SHAPE = Adaptive(start=4, maximum=64, cooldown_s=1.0)


def test_an_ask_past_the_longest_wait_holds_only_the_cooldown() -> None:
    aimd = Aimd(SHAPE, max_wait_s=60.0)
    aimd.refused(10.0, 999_999_999.0)
    assert aimd.hold_until == 10.0 + SHAPE.cooldown_s
    aimd.refused(20.0, float("inf"))
    assert aimd.hold_until == 20.0 + SHAPE.cooldown_s


def test_an_ask_within_the_longest_wait_is_held_whole() -> None:
    aimd = Aimd(SHAPE, max_wait_s=60.0)
    aimd.refused(10.0, 30.0)
    assert aimd.hold_until == 40.0
    aimd.refused(11.0, 45.0)  # the same episode, a longer ask: extended
    assert aimd.hold_until == 56.0


def test_the_run_holds_no_longer_than_its_max_retry_wait() -> None:
    spec = RunSpec(
        cases=(str(CASES / "answer.yaml"),),
        target=TargetSpec("mock", max_retry_wait=5.0),
        plan=Plan(runs=1, warmup=0, load=SHAPE),
        out=None,
    )
    session = Session(spec)
    aimd = session.engine.aimd
    assert aimd is not None and aimd.max_wait_s == 5.0
    aimd.refused(1.0, 30.0)  # past 5 s: refused, not held
    assert aimd.hold_until == 1.0 + SHAPE.cooldown_s
