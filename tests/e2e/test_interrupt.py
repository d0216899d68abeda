"""Ctrl-C on a real `perfbench run` process: it stops promptly, keeps what it measured and marks
the run interrupted. Bounded: the process is killed if it ignores the signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import CASES, run_under_way, start_up

SLOW = """
name: slow
ttft_ms: 30
itl_ms: 2
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
tool_latency_scale: 0.1
"""


@contextmanager
def slow_run_under_way(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A 50-pass run of every example case against SLOW, once its second pass has started;
    and the folder its run directory is in."""
    profile = tmp_path / "slow.yaml"
    profile.write_text(SLOW)
    out = tmp_path / "runs"
    args = ["run", str(CASES), "-t", f"mock:{profile}", "--runs", "50", "--warmup", "0"]
    with run_under_way(*args, "--out", str(out)) as proc:
        yield proc, out


def test_sigint_marks_the_run_interrupted_and_keeps_samples(tmp_path: Path) -> None:
    with slow_run_under_way(tmp_path) as (proc, out):
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 130, stderr
    [run_dir] = list(out.iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["runs"] and summary["runs"][0]["overall"]["ok"] == 16
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    assert len(lines) >= 16
    assert "interrupted" in stdout and "Run directory" in stdout
    assert f"Stopped: continue with perfbench run --resume {run_dir}" in stdout


HUNG = SLOW.replace("ttft_ms: 30", "ttft_ms: 60000").replace("name: slow", "name: hung")


def test_ctrl_c_exits_within_two_seconds_even_with_tasks_in_flight(tmp_path: Path) -> None:
    """Every task waits a minute for its first token; Ctrl-C must not wait for them: the run
    is gone within 2 s on an idle machine. Under load, stopping (the summary written, the
    interpreter's exit) takes longer, as starting does: 2 s plus one measured start-up (a
    fixed 2 s failed at load average 19 with a CPU hog), still far from the tasks' minute."""
    deadline = 2.0 + start_up()
    profile = tmp_path / "hung.yaml"
    profile.write_text(HUNG)
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "perfbench", "run", str(CASES / "answer.yaml"), "-t"]
    cmd += [f"mock:{profile}", "--warmup", "0", "-c", "4", "--out", str(out), "--json"]
    cmd += ["--ramp-up", "0"]  # all 4 slots start with the pass
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the measured pass has started: 4 tasks are in flight
            if '"phase_changed"' in line:
                break
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        proc.wait(timeout=deadline)
        took = time.monotonic() - sent
    finally:
        proc.kill()
        _, stderr = proc.communicate()
    assert proc.returncode == 130 and took < deadline, stderr
    [run_dir] = list(out.iterdir())
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted", stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["runs"][0]["overall"]["cancelled"] == 4  # the tasks in flight, recorded


def test_the_mock_server_a_run_starts_stops_when_the_run_is_gone() -> None:
    """`-t mock+http` starts the mock server as a child process in a session of its own (so a
    Ctrl-C reaches the run, which stops it). A SIGKILL gives the run no chance to stop it; the
    child holds a pipe only the run writes to, and stops when it closes, as it does when the
    run's process dies, rather than serve on, orphaned (seen after `kill -9` of a run)."""
    from perfbench.targets.mock_http import MockHttp

    target = MockHttp("zero")
    target._spawn()
    process = target._process
    assert process is not None and process.stdin is not None
    assert "--until-stdin-closes" in process.args
    try:
        process.stdin.close()  # what the kernel does when the run's process dies
        assert process.wait(10) == 0
    finally:
        target._stop()


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path: Path) -> None:
    """`timeout 30 perfbench run …` or a cancelled CI job sends SIGTERM: the run stayed
    `running`, with no summary. It stops as on Ctrl-C now, and exits 143 (as promptly: 5 s
    on an idle machine, plus a start-up measured now on a loaded one)."""
    deadline = 5.0 + start_up()
    profile = tmp_path / "hung.yaml"
    profile.write_text(HUNG)
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "perfbench", "run", str(CASES / "answer.yaml"), "-t"]
    cmd += [f"mock:{profile}", "--warmup", "0", "-c", "4", "--out", str(out), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"phase_changed"' in line:
                break
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=deadline)
    finally:
        proc.kill()
        _, stderr = proc.communicate()
    assert proc.returncode == 143, stderr
    [run_dir] = list(out.iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert (meta["status"], meta["stopped_by"]) == ("interrupted", "SIGTERM")
    assert (run_dir / "summary.json").is_file()


def test_ctrl_c_stops_a_sweep_cleanly_and_it_resumes(tmp_path: Path) -> None:
    """A sweep exited 130 with no output and its level recorded `failed: CancelledError`."""
    profile = tmp_path / "slow.yaml"
    profile.write_text(SLOW)
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "perfbench", "sweep", str(CASES / "answer.yaml"), "-t"]
    cmd += [f"mock:{profile}", "-c", "1,2", "--runs", "3", "--warmup", "0", "--repeat", "20"]
    cmd += ["--out", str(out), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(out.glob("*/level-1/samples.jsonl")):
            time.sleep(0.05)
        time.sleep(0.3)  # some tasks of the first level are measured
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Sweep directory" in stdout and "--resume" in stdout
    [sweep_dir] = list(out.iterdir())
    level = json.loads((sweep_dir / "level-1" / "meta.json").read_text())
    assert level["status"] == "interrupted" and "error" not in level
    plan = json.loads((sweep_dir / "sweep-plan.json").read_text())
    assert plan["status"] == "interrupted"
    done = subprocess.run(
        [sys.executable, "-m", "perfbench", "sweep", "--resume", str(sweep_dir), "-q"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((sweep_dir / "sweep-plan.json").read_text())["status"] == "completed"
