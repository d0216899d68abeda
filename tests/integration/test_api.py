"""The library entry points and the one observer: what a script or notebook calls, and what
it hears while a run works."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from perfbench import api
from perfbench.cli import app
from perfbench.cli.options import OUTPUT, PASSES, TARGET
from perfbench.engine.observer import Engine, RunObserver
from perfbench.engine.results import RunResult
from perfbench.engine.session import Session
from perfbench.sample import Phase, Sample
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile


class Recording(RunObserver):
    def __init__(self) -> None:
        self.heard: list[Any] = []

    def run_started(self, meta: Any, planned: int, engine: Engine) -> None:
        self.heard.append(("started", planned, engine.limit(), engine.tasks_in_flight()))

    def pass_started(self, phase: Phase, run: int, tasks: int) -> None:
        self.heard.append(("pass", phase, run, tasks))

    def sample(self, sample: Sample) -> None:
        self.heard.append("sample")

    def run_finished(self, result: RunResult) -> None:
        self.heard.append(("finished", result.meta["status"]))


@pytest.mark.anyio
async def test_the_observer_hears_a_run_in_order(example_suite: Suite) -> None:
    watch = Recording()
    spec = RunSpec(plan=Plan(runs=1, warmup=1, concurrency=4), out=None)
    await Session(spec, watch, suite=example_suite, target=MockAgent(fixed_profile())).run()
    n = len(example_suite.cases)
    assert watch.heard == [
        ("started", 2 * n, None, 0),
        ("pass", "warmup", 0, n),
        *["sample"] * n,
        ("pass", "measured", 0, n),
        *["sample"] * n,
        ("finished", "completed"),
    ]


@pytest.mark.anyio
async def test_a_sample_hook_not_overridden_is_never_called(example_suite: Suite) -> None:
    class Quiet(RunObserver):
        pass

    spec = RunSpec(plan=Plan(runs=1, warmup=0), out=None)
    session = Session(spec, Quiet(), suite=example_suite, target=MockAgent(fixed_profile()))
    assert session.recorder.observers == ()
    assert (await session.run()).meta["status"] == "completed"


def test_api_run_makes_a_run_directory_whose_spec_resumes_it(tmp_path: Path) -> None:
    spec = RunSpec.build([CASES / "answer.yaml"], TargetSpec("mock:zero"), Plan(runs=1, warmup=0),
                         label="lib", out=tmp_path)  # fmt: skip
    result = api.run(spec)
    assert result.run_dir is not None and result.meta["status"] == "completed"
    meta = json.loads((result.run_dir / "meta.json").read_text())
    assert RunSpec.from_doc(meta["spec"]) == spec
    with pytest.raises(Exception, match="complete; nothing to resume"):
        api.resume(result.run_dir)


def _params(command: str) -> set[str]:
    group = get_command(app)
    return {p.name or "" for p in group.commands[command].params}  # type: ignore[attr-defined]


def test_run_and_sweep_declare_the_same_shared_flags() -> None:
    shared = {f.name for f in (*TARGET, *PASSES, *OUTPUT)}
    assert shared <= _params("run") and shared <= _params("sweep")


def test_a_sweep_takes_every_target_option_run_has(tmp_path: Path) -> None:
    """Before the shared flags, `sweep` had no --retries, --no-stream, --label or --prices."""
    args = ["sweep", str(CASES / "answer.yaml"), "-t", "mock:zero", "-c", "1", "--runs", "1",
            "--warmup", "0", "--no-stream", "--retries", "0", "--check-tokens", "--label", "L",
            "-q", "--out", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    [sweep_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    meta = json.loads((sweep_dir / "level-1" / "meta.json").read_text())
    target = meta["spec"]["target"]
    assert (target["stream"], target["retries"], target["check_tokens"]) == (False, 0, True)
    assert meta["label"] == "L" and sweep_dir.name.endswith("_L")
