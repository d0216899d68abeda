"""`--abort-on` limits: parsed as the condition that stops a run, checked only after the grace
period and enough tasks (k6's delayAbortEval)."""

from __future__ import annotations

import pytest

from perfbench.errors import GateError
from perfbench.stats import abort


def test_a_limit_is_crossed_only_after_the_grace_period_and_enough_tasks() -> None:
    rules = abort.parse("error_rate>20%,p95>=2s", grace_s=5)
    bad = abort.figures(done=20, ok=10, latency={50.0: 0.1, 95.0: 0.2, 99.0: 0.3})
    assert bad["error_rate"] == 0.5
    assert rules.crossed(bad, measured_s=4.9, tasks=20) is None  # within the grace
    assert rules.crossed(bad, measured_s=5.0, tasks=abort.MIN_TASKS - 1) is None  # too few
    crossed = rules.crossed(bad, measured_s=5.0, tasks=20)
    assert crossed is not None and crossed.metric == "error_rate"
    assert abort.describe(crossed, 0.5) == "error_rate>20% (was 50.0%)"
    slow = abort.figures(done=20, ok=20, latency={50.0: 1.0, 95.0: 2.0, 99.0: 3.0})
    crossed = rules.crossed(slow, measured_s=6, tasks=20)
    assert crossed is not None and crossed.metric == "p95"  # >= takes the limit itself
    fine = abort.figures(done=20, ok=19, latency={50.0: 1.0, 95.0: 1.9, 99.0: 3.0})
    assert rules.crossed(fine, measured_s=60, tasks=20) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("error_rate<5%", "write the condition that stops the run"),
        ("tokens_out>5", "write the condition that stops the run"),
        ("p95{case=a}>2s", "write the condition that stops the run"),
        ("p95>soon", "'soon' is not a number"),
        (" , ", "no limit given"),
    ],
)
def test_a_limit_that_cannot_stop_a_run_is_refused(text: str, message: str) -> None:
    with pytest.raises(GateError, match=message):
        abort.parse(text)
