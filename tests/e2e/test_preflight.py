"""A run of failures is not a measurement (issue 22 item 3): a target that cannot be reached
fails the run before its first task (exit 3, saying what to check), and a run in which more
than --max-error-rate of the measured tasks failed exits 8, not 0. Real executable, loopback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from perfbench import api, store
from perfbench.errors import TargetError
from perfbench.spec import Plan, RunSpec, TargetSpec
from tests.helpers import invoke

CASE = "cases:\n  - {id: c, language: en, input: hi, timeout_s: 5}\n"


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cases(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(CASE)
    return tmp_path / "s.yaml"


def test_a_target_that_is_down_fails_the_run_before_its_first_task(
    tmp_path: Path, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    done = invoke("run", str(_cases(tmp_path)), "-t", "openai/m", "--base-url", url,
               "--out", str(tmp_path / "runs"), "--runs", "1", "--warmup", "0")  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "pre-flight: cannot connect to" in done.stderr and "--no-preflight" in done.stderr
    assert "Traceback" not in done.stderr
    [run_dir] = (tmp_path / "runs").iterdir()  # listed as refused, not as a failed measurement
    assert store.read_meta(run_dir)["status"] == "refused"
    listed = invoke("list", str(tmp_path / "runs"))
    assert "refused" in listed.stdout and "failed" not in listed.stdout, listed.stdout
    spec = RunSpec.build([_cases(tmp_path)], TargetSpec("openai/m", base_url=url),
                         Plan(runs=1, warmup=0), out=tmp_path / "api")  # fmt: skip
    with pytest.raises(TargetError, match="pre-flight"):  # the library says so too
        api.run(spec, interruptible=False)


def test_a_run_of_failures_exits_8_and_the_limit_is_the_users(
    tmp_path: Path, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    target = ("-t", "openai/m", "--base-url", url, "--no-preflight", "--retries", "0")
    args = ("run", str(_cases(tmp_path)), *target, "--runs", "1", "--warmup", "0",
            "--out", str(tmp_path / "runs"))  # fmt: skip
    failed = invoke(*args)
    assert failed.returncode == 8, failed.stderr
    assert "100% of the measured tasks failed" in failed.stdout + failed.stderr
    assert invoke(*args, "--max-error-rate", "1").returncode == 0


def test_a_run_that_mostly_succeeds_exits_0(tmp_path: Path) -> None:
    done = invoke("run", str(_cases(tmp_path)), "-t", "mock:zero", "--runs", "1", "--warmup", "0",
               "--out", str(tmp_path / "runs"), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_sweep_whose_lowest_level_failed_exits_8(tmp_path: Path, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    args = ("sweep", str(_cases(tmp_path)), "-t", "openai/m", "--base-url", url,
            "--no-preflight", "--retries", "0", "--concurrency", "1,2", "--runs", "1",
            "--warmup", "0", "--out", str(tmp_path / "sweeps"))  # fmt: skip
    failed = invoke(*args)
    assert failed.returncode == 8, failed.stderr
    assert "at the lowest level (1) failed, above --max-error-rate 0.5" in failed.stdout
    assert "--resume" not in failed.stdout  # it was not interrupted: nothing to continue
    assert invoke(*args, "--max-error-rate", "1").returncode == 0
