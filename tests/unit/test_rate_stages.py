"""`--stages` with rates (`30s:5/s,60s:20/s`, k6's ramping-arrival-rate): an open loop whose
arrival rate ramps linearly between stages, a task started each time the arrivals due (the
rate's integral) reach a whole number. Before, stages could only ramp the tasks in flight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import app
from perfbench.errors import GateError
from perfbench.load import stages
from tests.helpers import CASES


def test_a_steady_stage_is_the_constant_schedule_and_a_ramp_its_integral() -> None:
    steady = stages.arrivals(((0.0, 10.0), (2.0, 10.0)))  # at once to 10/s, then 2 s of it
    assert steady == pytest.approx([k / 10 for k in range(20)])
    # 0 → 10/s over 1 s: 5 due, the k-th at √(k/5) s (k = 5 x²), then 10/s for 1 s: 10 more
    ramped = stages.arrivals(((1.0, 10.0), (1.0, 10.0)))
    assert ramped == pytest.approx(
        [(k / 5) ** 0.5 for k in range(5)] + [1 + k / 10 for k in range(10)]
    )
    # nothing while the rate is 0, then down from 10/s to 0 over 1 s: 5 due
    assert len(stages.arrivals(((1.0, 0.0), (1.0, 10.0), (1.0, 0.0)))) == 10
    assert stages.arrivals(((1.0, 0.0), (1.0, 10.0)))[0] == pytest.approx(1.0)


def test_rates_are_told_from_tasks_in_flight_and_never_mixed() -> None:
    assert stages.parse_rates("30s:5/s, 1m:20/s,30s:0/s") == (
        (30.0, 5.0),
        (60.0, 20.0),
        (30.0, 0.0),
    )
    assert stages.parse_rates("30s:8,60s:32") is None  # a closed loop's stages
    with pytest.raises(GateError, match="'10s:4' is not DURATION:RATE/s"):
        stages.parse_rates("30s:5/s,10s:4")
    with pytest.raises(GateError, match="at least one task"):
        stages.parse_rates("10s:0/s")


def test_run_starts_a_task_at_each_arrival_of_the_stages(tmp_path: Path) -> None:
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "-q", "--stages",
            "0.5s:20/s,0.5s:20/s", "--out", str(tmp_path)]  # fmt: skip
    ran = CliRunner().invoke(app, args)
    assert ran.exit_code == 0, ran.output
    (run_dir,) = tmp_path.iterdir()
    meta = store.read_json(run_dir / store.META)
    assert meta["plan"]["runs"] == 1 and meta["plan"]["warmup"] == 0  # the stages are the test
    planned = stages.arrivals(((0.5, 20.0), (0.5, 20.0)))
    assert len(planned) == 15  # 5 due over the ramp, 10 at 20/s
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    scheduled = sorted(json.loads(line)["scheduled"] for line in lines)
    assert len(scheduled) == 15
    first = scheduled[0]
    assert [s - first for s in scheduled] == pytest.approx(planned, abs=1e-6)
