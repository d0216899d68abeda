"""The disk fails under a run: a full disk (writes to /dev/full fail with ENOSPC, as a full
file system does) and an output folder that cannot be made. perfbench reports it plainly,
records how the run ended, and keeps what it could write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import ExitCode, app
from perfbench.engine.session import Session
from perfbench.errors import StoreError
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import Suite
from tests.helpers import CASES

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@pytest.mark.anyio
async def test_a_full_disk_stops_the_run_with_a_clear_error_and_a_truthful_meta(
    example_suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = store.make_dir

    def make_then_fill(path: Path) -> None:  # samples.jsonl lands on a full "disk"
        made(path)
        (path / store.SAMPLES).symlink_to("/dev/full")

    monkeypatch.setattr(store, "make_dir", make_then_fill)
    run_dir = tmp_path / "run"
    spec = RunSpec(target=TargetSpec("mock:zero"), plan=Plan(runs=1))
    session = Session(spec, suite=example_suite, run_dir=run_dir)
    with pytest.raises(BaseExceptionGroup) as caught:
        await session.run()
    errors, rest = caught.value.split(StoreError)
    assert errors is not None and rest is None
    leaf: BaseException = errors
    while isinstance(leaf, BaseExceptionGroup):  # task groups nest: runner, then workers
        leaf = leaf.exceptions[0]
    message = str(leaf)
    assert "No space left on device" in message and f"--resume {run_dir}" in message
    meta = json.loads((run_dir / store.META).read_text())
    assert meta["status"] == "failed" and "No space left on device" in meta["error"]
    assert (run_dir / store.SUMMARY).is_file()  # what was measured (nothing) is summarised

    # Space freed: the run resumes and completes.
    (run_dir / store.SAMPLES).unlink()
    monkeypatch.setattr(store, "make_dir", made)
    resumed = Session(spec, suite=example_suite, run_dir=run_dir, resume=True)
    result = await resumed.run()
    assert result.meta["status"] == "completed"
    assert len((run_dir / store.SAMPLES).read_text().splitlines()) == 2 * len(example_suite.cases)


def test_an_output_folder_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    args = [
        "run",
        str(CASES / "answer.yaml"),
        "-t",
        "mock:zero",
        "--out",
        str(blocker / "runs"),
        "-q",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ExitCode.CONFIG
    assert "cannot create" in result.output and "Not a directory" in result.output
    assert "Traceback" not in result.output


def test_the_command_reports_a_full_disk_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk_dir(self: Session, started: object) -> Path:
        path = tmp_path / "run"
        path.mkdir()
        (path / store.SAMPLES).symlink_to("/dev/full")
        return path

    monkeypatch.setattr(Session, "_create_dir", full_disk_dir)
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--out", str(tmp_path), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "error: cannot append to" in result.output and "No space left" in result.output
    assert "Traceback" not in result.output and "sub-exception" not in result.output
