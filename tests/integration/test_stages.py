"""Ramping stages (`--stages "30s:8,60s:32,30s:0"`, k6's): the tasks in flight follow the
stages' target over each measured run, linearly between stages. Under virtual time."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import app
from perfbench.engine.session import Session
from perfbench.errors import GateError
from perfbench.load import stages
from perfbench.spec import Plan, RunSpec
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile

STAGES = ((20.0, 4), (20.0, 8), (10.0, 0))


def test_the_target_ramps_linearly_and_slots_wake_when_it_passes_them() -> None:
    assert stages.parse("20s:4, 20s:8,10s:0") == STAGES
    assert stages.parse("1m:2,500ms:0") == ((60.0, 2), (0.5, 0))
    assert [stages.target(STAGES, t) for t in (0, 10, 20, 30, 40, 45, 50)] == [
        0, 2, 4, 6, 8, 4, 0,
    ]  # fmt: skip
    assert stages.next_active(STAGES, 0, 0) == pytest.approx(0.0, abs=1e-6)
    assert stages.next_active(STAGES, 5, 0) == pytest.approx(25.0)  # 4 → 8 passes 5 at 25 s
    assert stages.next_active(STAGES, 5, 30) == 30  # above it now
    assert stages.next_active(STAGES, 5, 48) is None  # ramped down below it for good
    for bad in ("30:8:1", "30s", "0s:5", "10s:0"):
        with pytest.raises(GateError, match="--stages"):
            stages.parse(bad)


@pytest.mark.anyio
async def test_the_tasks_in_flight_follow_the_stages(example_suite: Suite, tmp_path: Path) -> None:
    plan = Plan(runs=1, warmup=0, stages=STAGES)
    session = Session(RunSpec(plan=plan, out=str(tmp_path)), suite=example_suite,
                      target=MockAgent(fixed_profile()))  # fmt: skip
    result = await session.run()
    assert result.run_dir is not None and result.meta["load"]["stages"] == [[20, 4], [20, 8],
                                                                          [10, 0]]  # fmt: skip
    samples = list(store.read_samples(result.run_dir))
    begin = 0.0  # no warmup: the pass starts with the run
    assert min(s.start for s in samples) < 0.01
    # Ramping up, never more in flight than the target allowed when a task started (ramping
    # down, the slots let go finish their task first: k6's graceful ramp-down).
    for s in (s for s in samples if s.start - begin < 40):
        assert s.concurrency <= math.ceil(stages.target(STAGES, s.start - begin)), s
    assert max(s.concurrency for s in samples) == 8
    assert max(s.start for s in samples) - begin < 50.0
    early = [s for s in samples if s.start - begin < 10]
    late = [s for s in samples if 30 <= s.start - begin < 40]
    assert 2 * len(early) < len(late)  # about 1 in flight against about 7


def test_stages_replace_the_other_load_flags_and_default_to_one_run(tmp_path: Path) -> None:
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "-q", "--stages", "0.2s:2"]
    both = CliRunner().invoke(app, [*args, "-c", "4", "--out", str(tmp_path)])
    assert both.exit_code == 2 and "--concurrency: --stages sets the load" in both.output
    ran = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert ran.exit_code == 0, ran.output
    (run_dir,) = tmp_path.iterdir()
    assert store.read_json(run_dir / store.META)["plan"]["runs"] == 1
