"""Ramping stages (`--stages "30s:8,60s:32,30s:0"`, k6's): the tasks in flight follow the
stages' target over each measured run, linearly between stages. Under virtual time."""

from __future__ import annotations

import math
import shutil
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


K6 = """[[run.stages]]
duration = "0.2s"
target = 2

[[run.stages]]
duration = 0.1
target = 0
"""


def _in(folder: Path, toml: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    (folder / "perfbench.toml").write_text(toml, encoding="utf-8")
    monkeypatch.chdir(folder)
    return ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "-q", "--out", "runs"]


def test_perfbench_toml_sets_the_stages_k6s_way_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = _in(tmp_path, K6, monkeypatch)
    ran = CliRunner().invoke(app, args)
    assert ran.exit_code == 0, ran.output
    assert "load: the stages of perfbench.toml ([run] stages): 0.2s:2,0.1s:0" in ran.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = store.read_json(run_dir / store.META)
    assert meta["load"]["stages"] == [[0.2, 2], [0.1, 0]] and meta["plan"]["runs"] == 1
    shutil.rmtree(tmp_path / "runs")
    fixed = CliRunner().invoke(app, [*args, "-c", "3"])  # the load given here: the file yields
    assert fixed.exit_code == 0, fixed.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = store.read_json(run_dir / store.META)
    assert "stages" not in meta["load"] and meta["plan"]["concurrency"] == 3
    assert "load: the stages" not in fixed.stderr


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ('[run]\nstages = "30x:8"', "perfbench.toml: [run] stages: '30x:8' is not DURATION:TARGET"),
        (K6.replace("target = 0", 'target = "none"'),
         "perfbench.toml: [run] stages #2: target should be the tasks in flight (8) or a rate"),
        (K6.replace('"0.2s"', '"soon"'),
         "perfbench.toml: [run] stages #1: duration should be a time, as in \"30s\""),
        ('[[run.stages]]\nduration = "1s"\ntraget = 2',
         "perfbench.toml: [run] stages #1 should be a table of duration and target"),
        ('[run]\nstage = "1s:2"', "perfbench.toml: [run] has unknown key 'stage'; known: stages"),
        ('[run]\nstages = "1s:2,1s:5/s"', "perfbench.toml: [run] stages: '1s:2' is not "
         "DURATION:RATE/s"),
    ],
)  # fmt: skip
def test_a_bad_stage_in_perfbench_toml_names_the_file_key_and_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, said: str
) -> None:
    done = CliRunner().invoke(app, _in(tmp_path, toml, monkeypatch))
    assert done.exit_code == 3, done.output
    assert said in " ".join(done.stderr.split()), done.stderr
    assert done.exception is None or isinstance(done.exception, SystemExit)  # no traceback
    assert not (tmp_path / "runs").exists()
