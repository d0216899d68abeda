"""Resume: a run killed with SIGKILL at seeded moments, then `perfbench run --resume`, ends
with every (phase, run, case, iteration) exactly once in samples.jsonl and status completed.
Bounded: each run is small and each process is killed or waited for with a timeout."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CASES

PROFILE = """
name: quick
ttft_ms: 20
itl_ms: 1
output_chars: 40
tool_latency_scale: 0.1
models: {sim: {tokens_per_char: {default: 0.25}}}
"""


def perfbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "perfbench", *args]


@pytest.mark.parametrize("point", range(5))
def test_kill_9_then_resume_runs_every_task_exactly_once(tmp_path: Path, point: int) -> None:
    profile = tmp_path / "quick.yaml"
    profile.write_text(PROFILE)
    out = tmp_path / "runs"
    cmd = perfbench(
        "run",
        str(CASES / "lookup.yaml"),
        "-t",
        f"mock:{profile}",
        "--runs",
        "3",
        "--repeat",
        "3",
        "--warmup",
        "1",
        "--out",
        str(out),
        "-q",
    )
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    time.sleep(random.Random(point).uniform(0.8, 2.5))  # seeded kill points, inside the run
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    [run_dir] = list(out.iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    if meta["status"] == "completed":
        pytest.skip("the run finished before the kill point on this machine")
    done = subprocess.run(
        perfbench("run", "--resume", str(run_dir), "-q"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    keys = [
        (d["phase"], d["run"], d["case"], d["iteration"])
        for d in map(json.loads, (run_dir / "samples.jsonl").read_text().splitlines())
    ]
    assert len(keys) == len(set(keys)) == 4 * 3 * (1 + 3)  # 4 cases × 3 repeats × 4 passes
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "completed" and meta["resumed"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert sum(r["overall"]["tasks"] for r in summary["runs"]) == 36


def test_resume_refuses_a_changed_suite(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text((CASES / "answer.yaml").read_text())
    out = tmp_path / "runs"
    subprocess.run(
        perfbench("run", str(cases), "-t", "mock:zero", "--runs", "1", "--out", str(out), "-q"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    [run_dir] = list(out.iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    meta["status"] = "interrupted"
    (run_dir / "meta.json").write_text(json.dumps(meta))
    cases.write_text(cases.read_text().replace("Answer briefly.", "Answer at length."))
    done = subprocess.run(
        perfbench("run", "--resume", str(run_dir)), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3 and "another version of the suite" in done.stderr
