"""A closed loop bounded by time (`-c N --duration S`, k6's and Locust's habit): the measured
runs share S seconds, each cycling over the suite until its share is up; tasks in flight then
finish and count. Under virtual time, so the bounds are exact. Before, `-c 2 --duration 5` was
refused ("--duration goes with --rate")."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import app
from perfbench.engine.session import Session
from perfbench.spec import Plan, RunSpec
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile


@pytest.mark.anyio
async def test_the_measured_runs_share_the_duration(example_suite: Suite, tmp_path: Path) -> None:
    plan = Plan(runs=2, warmup=1, concurrency=2, duration_s=20.0)
    spec = RunSpec(plan=plan, out=str(tmp_path))
    session = Session(spec, suite=example_suite, target=MockAgent(fixed_profile()))
    result = await session.run()
    assert result.run_dir is not None
    assert result.meta["status"] == "completed"
    assert result.meta["load"]["duration_s"] == 20.0
    samples = list(store.read_samples(result.run_dir))
    warmup = [s for s in samples if s.phase == "warmup"]
    assert len(warmup) == len(example_suite.cases)  # the warmup stays one pass
    measured = [s for s in samples if s.phase == "measured"]
    begin = min(s.start for s in measured)
    for run in (0, 1):
        mine = [s for s in measured if s.run == run]
        # more than one pass over the suite, each started within its 10 s share
        assert len(mine) > len(example_suite.cases)
        assert max(s.start for s in mine) < begin + 10.0 * (run + 1)
        assert all(s.status == "ok" for s in mine)  # in flight at the end: finished, counted
    last_end = max(s.end for s in measured)
    longest = max(s.latency for s in measured)
    assert begin + 20.0 <= last_end <= begin + 20.0 + longest
    assert session.planned_tasks() == 0  # no count to show, nor an ETA


def test_the_cli_takes_a_closed_loop_duration_and_refuses_a_cap_without_rate(
    tmp_path: Path,
) -> None:
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "-q", "--runs", "1"]
    capped = CliRunner().invoke(app, [*args, "--max-in-flight", "2", "--out", str(tmp_path)])
    assert capped.exit_code == 2 and "--max-in-flight goes with --rate" in capped.output
    timed = CliRunner().invoke(app, [*args, "-c", "2", "--duration", "0.3", "--out", str(tmp_path)])
    assert timed.exit_code == 0, timed.output
