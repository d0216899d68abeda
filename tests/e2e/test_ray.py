"""`perfbench run --ray local` (issue 25): the workers as Ray actors on a local Ray instance
the run starts on 127.0.0.1 and stops at its end. The same guarantees as worker processes
(tests/e2e/test_workers.py): every task exactly once, a summary equal to the statistics of
samples.jsonl, one open-loop schedule shared (and one AIMD limit: test_workers.py's adaptive
test, its `2-ray` case), and an actor killed mid-run leaves an interrupted run that resumes
exactly once. Bounded: small suites, a timeout on each
command; skipped only when Ray (the `ray` extra, which `make test` installs) is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from perfbench import store
from perfbench.stats.summary import summarize
from perfbench.suite import load_suite
from tests.e2e.test_workers import PACED, offsets
from tests.helpers import CASES, cli, perfbench

pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

RAY = ("--ray", "local")


def _run(tmp: Path, *args: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp / "runs"
    proc = cli("run", str(CASES), "--out", str(out), "-q", *RAY, *args, timeout=180)
    dirs = sorted(out.iterdir()) if out.exists() else []
    return (dirs[-1] if dirs else out), proc


def _meta(run_dir: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((run_dir / "meta.json").read_text())
    return meta


def test_two_actors_split_the_load_and_the_summary_equals_the_samples(tmp_path: Path) -> None:
    run_dir, proc = _run(tmp_path, "-t", "mock:zero", "--workers", "2", "-c", "6",
                         "--runs", "3", "--repeat", "7")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    samples = list(store.read_samples(run_dir))
    keys = Counter(s.key for s in samples)
    assert len(keys) == 16 * 7 * 4 and set(keys.values()) == {1}  # every task exactly once
    summary = json.loads((run_dir / "summary.json").read_text())
    suite = load_suite([CASES])
    recomputed = summarize(samples, {c.id: c.timeout_s for c in suite.cases})
    client = summary.pop("client")
    assert summary == json.loads(json.dumps(recomputed))  # merged losslessly
    # The passes began together: every actor's first task within 0.5 s of the other's.
    assert client["start_skew_s"] is not None and 0 <= client["start_skew_s"] < 0.5
    assert client["start_late_s"] is not None and client["start_late_s"] < 1.0
    assert client["clock_offsets_s"] == [0.0, 0.0]  # one host, one clock: nothing corrected
    meta = _meta(run_dir)
    assert meta["status"] == "completed" and meta["plan"]["ray"] == "local"
    assert len(meta["nodes"]) == 2  # where each actor ran
    assert "Traceback" not in proc.stderr and "Ray" not in proc.stderr  # Ray's logs kept quiet


def test_actors_share_one_open_loop_schedule(tmp_path: Path) -> None:
    args = ["-t", "mock:zero", "--rate", "400", "--duration", "0.5", "--runs", "1", "--warmup", "0"]
    run_dir, proc = _run(tmp_path, *args, "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    one = cli("run", str(CASES), "--out", str(tmp_path / "one"), "-q", *args, "--workers", "1")
    assert one.returncode == 0, one.stderr
    (one_dir,) = list((tmp_path / "one").iterdir())

    two, single = offsets(run_dir), offsets(one_dir)
    assert len(two) == len(single) == 200
    assert two == pytest.approx(single, abs=1e-4)  # the same arrivals, dealt between actors


def _actors() -> list[int]:
    found = subprocess.run(["pgrep", "-f", "_WorkerActor.serve"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def test_an_actor_killed_mid_run_leaves_a_run_that_resumes_exactly_once(tmp_path: Path) -> None:
    profile = tmp_path / "paced.yaml"
    profile.write_text(PACED)
    out = tmp_path / "runs"
    cmd = perfbench("run", str(CASES), "-t", f"mock:{profile}", "--workers", "2", "-c", "4",
                    "--runs", "20", *RAY, "--out", str(out))  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            deadline = time.monotonic() + 90
            while not _measuring(out) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _measuring(out), "the run never started measuring"
            time.sleep(0.5)
            victims = _actors()
            assert len(victims) == 2, victims
            os.kill(victims[0], signal.SIGKILL)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    [run_dir] = list(out.iterdir())
    meta = _meta(run_dir)
    assert meta["status"] == "interrupted", stderr
    assert "was lost" in meta["stopped_by"] and "Traceback" not in stderr
    assert list(store.read_samples(run_dir))  # what was measured is kept
    assert not _actors()  # the run's Ray instance is gone, its actors with it

    resumed = cli("run", "--resume", str(run_dir), "-q", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    keys = Counter(s.key for s in store.read_samples(run_dir))
    assert len(keys) == 16 * 21 and set(keys.values()) == {1}
    assert _meta(run_dir)["status"] == "completed"


def _measuring(out: Path) -> bool:
    """Some measured sample is on disk."""
    return any('"phase":"measured"' in p.read_text() for p in out.glob("*/samples.jsonl"))
