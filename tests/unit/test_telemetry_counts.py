"""`--metrics-port`'s task counters between progress ticks: the tasks in flight come from the
engine once a tick (every second), the finished ones as each ends. Before, the page added the
tick's in-flight count to every task finished since, so tasks started overcounted (51 against
48 finished at the end of a run) and fell at the next tick, which Prometheus reads as a
counter's restart."""

from __future__ import annotations

import itertools
from typing import Any

from perfbench.sample import Sample
from perfbench.telemetry import Telemetry


def _snap(in_flight: int) -> dict[str, Any]:
    return {"concurrency": in_flight, "limit": None}


def _finish(telemetry: Telemetry, n: int) -> None:
    for i in range(n):
        telemetry.task(Sample("measured", 0, "c", i, "en", 0.0, 0.1, status="ok"), 0.0)


def _value(telemetry: Telemetry, name: str) -> float | None:
    return telemetry.registry.get_sample_value(name)


def test_tasks_finished_after_a_tick_are_not_counted_in_flight_too() -> None:
    telemetry = Telemetry(0)  # never served: read from its registry
    telemetry.started({"id": "r", "load": {"shape": "fixed", "concurrency": 4}}, _snap(0))
    _finish(telemetry, 45)
    telemetry.tick(_snap(3))  # 45 finished, 3 running: 48 started
    assert _value(telemetry, "perfbench_tasks_started_total") == 48
    _finish(telemetry, 3)  # the last three end before the next tick
    assert _value(telemetry, "perfbench_tasks_started_total") == 48
    assert _value(telemetry, "perfbench_tasks_in_flight") == 0


def test_tasks_started_never_falls_and_is_exact_at_the_end() -> None:
    telemetry = Telemetry(0)
    telemetry.started({"id": "r", "load": {"shape": "fixed", "concurrency": 4}}, _snap(0))
    seen: list[float] = []
    for running in (4, 4, 2, 4, 1):  # a tick's estimate, say of workers' latest samples
        telemetry.tick(_snap(running))
        seen.append(_value(telemetry, "perfbench_tasks_started_total") or 0.0)
        _finish(telemetry, 2)
        seen.append(_value(telemetry, "perfbench_tasks_started_total") or 0.0)
    assert all(a <= b for a, b in itertools.pairwise(seen)) and seen[0] > 0
    telemetry.finished("completed", 0, None, _snap(0))
    assert _value(telemetry, "perfbench_tasks_started_total") == 10 == telemetry.done
