"""A sweep killed with SIGKILL mid-level, then `perfbench sweep --resume`: finished levels are
read back, not measured again; the interrupted level continues; the findings cover all."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from perfbench.store.sweeps import resumable
from tests.helpers import CASES, invoke, perfbench

PROFILE = """
name: quick
ttft_ms: 40
itl_ms: 1
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
"""


def test_kill_9_mid_sweep_then_resume_keeps_finished_levels(tmp_path: Path) -> None:
    profile = tmp_path / "quick.yaml"
    profile.write_text(PROFILE)
    cmd = perfbench(
        "sweep", str(CASES / "answer.yaml"), "-t", f"mock:{profile}", "-c", "1,2,4",
        "--runs", "2", "--repeat", "4", "--warmup", "0", "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    with subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as proc:  # closes its pipe, waits for it
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # level 1 is done; level 2 has started
                if line.startswith("level 1:"):
                    break
            time.sleep(0.3)
        finally:
            proc.send_signal(signal.SIGKILL)
    [sweep] = list((tmp_path / "runs").iterdir())
    assert not (sweep / "sweep.json").exists()
    first = (sweep / "level-1" / "samples.jsonl").read_bytes()
    done = invoke("sweep", "--resume", str(sweep))
    assert done.returncode == 0, done.stderr
    assert (sweep / "level-1" / "samples.jsonl").read_bytes() == first  # not measured again
    levels = json.loads((sweep / "sweep.json").read_text())["levels"]
    assert [v["level"] for v in levels] == [1, 2, 4]
    for level in ("1", "2", "4"):
        lines = (sweep / f"level-{level}" / "samples.jsonl").read_text().splitlines()
        keys = [(d["phase"], d["run"], d["case"], d["iteration"]) for d in map(json.loads, lines)]
        assert len(keys) == len(set(keys)) == 4 * 4 * 2, level  # 4 cases × 4 repeats × 2 runs
    assert json.loads((sweep / "sweep-plan.json").read_text())["status"] == "completed"
    again = invoke("sweep", "--resume", str(sweep))
    assert again.returncode == 3 and "complete; nothing to resume" in again.stderr


def test_an_interrupted_open_loop_level_is_moved_aside_not_lost(tmp_path: Path) -> None:
    level = tmp_path / "level-5"
    level.mkdir()
    (level / "meta.json").write_text('{"status": "interrupted"}')
    (level.with_name("level-5.partial-1")).mkdir()
    assert resumable(level, open_loop=True) is False
    assert (tmp_path / "level-5.partial-2" / "meta.json").is_file() and not level.exists()
    closed = tmp_path / "level-8"
    closed.mkdir()
    (closed / "meta.json").write_text('{"status": "interrupted"}')
    assert resumable(closed, open_loop=False) is True
    empty = tmp_path / "level-16"
    empty.mkdir()
    assert resumable(empty, open_loop=False) is False and not empty.exists()
