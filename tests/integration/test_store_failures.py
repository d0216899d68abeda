"""The disk fails under a run: a full disk (writes to /dev/full fail with ENOSPC, as a full
file system does) and an output folder that cannot be made. perfbench reports it plainly,
records how the run ended, and keeps what it could write."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def test_a_run_that_cannot_keep_room_for_its_last_meta_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a nearly full disk the first meta.json fits and the last would not: the run is
    refused before it measures, and leaves no folder without a run behind."""
    made = store.new_run_dir
    folders: list[Path] = []

    def made_with_a_full_reserve(*args: Any) -> Path:  # only the reserve finds the disk full
        path = made(*args)
        (path / store.files.RESERVE).symlink_to("/dev/full")
        folders.append(path)
        return path

    monkeypatch.setattr(store, "new_run_dir", made_with_a_full_reserve)
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--out", str(tmp_path), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "No space left on device" in result.output and store.files.RESERVE in result.output
    assert "Traceback" not in result.output
    assert folders and not folders[0].exists()  # nothing half-made is left


@pytest.mark.anyio
async def test_a_resume_that_cannot_start_leaves_meta_as_it_was(
    example_suite: Suite, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    spec = RunSpec(target=TargetSpec("mock:zero"), plan=Plan(runs=1))
    await Session(spec, suite=example_suite, run_dir=run_dir).run()
    meta = run_dir / store.META
    doc = json.loads(meta.read_text())
    doc["status"] = "failed"  # as a run the disk stopped ends
    store.write_json(meta, doc)
    before = meta.read_bytes()
    (run_dir / store.files.RESERVE).symlink_to("/dev/full")
    with pytest.raises(StoreError, match=r"No space left on device.*resume again"):
        await Session(spec, suite=example_suite, run_dir=run_dir, resume=True).run()
    assert meta.read_bytes() == before
    assert not (run_dir / store.files.RESERVE).exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB file system (tmpfs; mounting needs root, as CI has)."""
    where = tmp_path / "disk"
    where.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)]
    if os.geteuid() != 0 or subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(disk: Path, leave_kib: int) -> None:
    """Fill ``disk`` until ``leave_kib`` KiB are free (a file system's own block size apart)."""
    (disk / "fill").unlink(missing_ok=True)
    stat = os.statvfs(disk)
    (disk / "fill").write_bytes(b"x" * (stat.f_bavail * stat.f_frsize - leave_kib * 1024))


@pytest.mark.parametrize("free_kib", [4, 8, 12, 16, 300])
def test_on_a_nearly_full_disk_a_run_never_stays_running(small_disk: Path, free_kib: int) -> None:
    """Whatever room is left, the run ends with a clear error and a meta.json that says how it
    ended (or no run directory at all): never one stuck at `running`. With 8 KiB free the
    first meta.json fitted and the last did not."""
    _fill(small_disk, free_kib)
    runs = small_disk / "runs"
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--runs", "40"]
    result = CliRunner().invoke(app, [*args, "--out", str(runs), "-q"])
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "No space left on device" in result.output and str(runs) in result.output
    assert "Traceback" not in result.output
    left = list(runs.iterdir()) if runs.exists() else []
    for run_dir in left:
        assert sorted(p.name for p in run_dir.iterdir()) == [store.META, store.SAMPLES]
        assert store.read_meta(run_dir)["status"] == "failed"
    if free_kib < 256:  # less than a run keeps back: refused before it measured
        assert not left
        return
    # Room made again: the failed run resumes and completes.
    (run_dir,) = left
    (small_disk / "fill").unlink()
    resumed = CliRunner().invoke(app, ["run", "--resume", str(run_dir), "-q"])
    assert resumed.exit_code == ExitCode.OK, resumed.output
    assert store.read_meta(run_dir)["status"] == "completed"
    assert len(list(store.read_samples(run_dir))) == 40 * 4 + 4  # measured and warmup
