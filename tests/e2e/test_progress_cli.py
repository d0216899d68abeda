"""The operator's view of a real run: the `--json` event stream read back and checked against
samples.jsonl, and the live view redrawing on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from perfbench.cli import app
from tests.helpers import CASES

QUICK = """
name: quick
ttft_ms: 5
itl_ms: 1
output_chars: 40
tool_latency_scale: 0.05
models: {sim: {tokens_per_char: {default: 0.25}}}
"""


def test_json_events_sequence_and_totals_match_the_samples(tmp_path: Path) -> None:
    (tmp_path / "quick.yaml").write_text(QUICK)
    args = ["run", str(CASES / "lookup.yaml"), "-t", f"mock:{tmp_path / 'quick.yaml'}"]
    args += ["--runs", "2", "--repeat", "2", "--out", str(tmp_path / "runs"), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished" and kinds[-2] == "progress"
    # The last event carries the headline figures (issue 36): no need to open summary.json.
    headline = events[-1]["headline"]
    assert headline["tasks"] == headline["ok"] > 0
    assert 0 < headline["p50"] <= headline["p95"] and headline["throughput"] > 0
    assert [(e["phase"], e["run"]) for e in events if e["event"] == "phase_changed"] == [
        ("warmup", 0),
        ("measured", 0),
        ("measured", 1),
    ]
    [run_dir] = list((tmp_path / "runs").iterdir())
    assert {e["run_id"] for e in events} == {run_dir.name}
    assert all(e["ts"].endswith("+00:00") and e["elapsed_s"] >= 0 for e in events)
    on_disk = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    finished = [e for e in events if e["event"] == "task_finished"]
    key = ("phase", "run", "case", "iteration", "status")
    assert sorted(tuple(e[k] for k in key) for e in finished) == sorted(
        tuple(s[k] for k in key) for s in on_disk
    )
    last = events[-1]
    assert last["status"] == "completed" and last["exit_code"] == 0
    assert sum(last["counts"].values()) == len(on_disk) == events[0]["planned_tasks"]
    assert last["counts"]["ok"] == sum(s["status"] == "ok" for s in on_disk)
    assert events[-2]["p95_s"] is not None  # provisional percentiles in progress events
    # The human tables went to stderr, not into the event stream.
    assert "Run directory" in result.stderr


def test_live_view_redraws_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "quick.yaml").write_text(QUICK.replace("ttft_ms: 5", "ttft_ms: 60"))
    cmd = [sys.executable, "-m", "perfbench", "run", str(CASES / "lookup.yaml"), "-t"]
    cmd += [f"mock:{tmp_path / 'quick.yaml'}", "--runs", "3", "--out", str(tmp_path / "runs")]
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        proc.wait(timeout=10)
    finally:
        proc.kill()
        os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, text
    # rich's Live redraws by moving the cursor up and erasing the line ("\x1b[2K").
    assert text.count("\x1b[2K") >= 2, text[:2000]
    assert "(provisional)" in text and "in flight" in text


def test_sweep_json_has_one_level_finished_per_level(tmp_path: Path) -> None:
    (tmp_path / "quick.yaml").write_text(QUICK)
    args = ["sweep", str(CASES / "answer.yaml"), "-t", f"mock:{tmp_path / 'quick.yaml'}"]
    args += ["-c", "1,2", "--runs", "1", "--warmup", "0", "--out", str(tmp_path), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["event"] for e in events] == ["level_finished", "level_finished", "run_finished"]
    assert [e["level"] for e in events[:2]] == [1.0, 2.0]
    [sweep_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert {e["run_id"] for e in events} == {sweep_dir.name}
    assert events[-1]["run_dir"] == str(sweep_dir) and events[-1]["levels"] == 2
    findings = json.loads((sweep_dir / "sweep.json").read_text())["findings"]
    assert "knee_kind" in events[-1] and events[-1]["knee_kind"] == findings["knee_kind"]
