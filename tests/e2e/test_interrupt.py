"""Ctrl-C on a real `perfbench run` process: it stops promptly, keeps what it measured and marks
the run interrupted. Bounded: the process is killed if it ignores the signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import CASES

SLOW = """
name: slow
ttft_ms: 30
itl_ms: 2
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
tool_latency_scale: 0.1
"""


def test_sigint_marks_the_run_interrupted_and_keeps_samples(tmp_path: Path) -> None:
    profile = tmp_path / "slow.yaml"
    profile.write_text(SLOW)
    out = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "perfbench",
        "run",
        str(CASES),
        "-t",
        f"mock:{profile}",
        "--runs",
        "50",
        "--warmup",
        "0",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until the measured phase is under way
            if "run 2/50" in line:
                break
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    [run_dir] = list(out.iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["runs"] and summary["runs"][0]["overall"]["ok"] == 16
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    assert len(lines) >= 16
    assert "interrupted" in stdout and "Run directory" in stdout
