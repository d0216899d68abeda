"""While a run works: `--metrics-port` serves its Prometheus page, and `--abort-on` stops it
when a limit is crossed (k6's abortOnFail), keeping what it measured, exit 9."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio

from perfbench import store
from perfbench.cli.events import Progress
from perfbench.engine.session import Session
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import load_suite
from perfbench.telemetry import Telemetry
from tests.helpers import CASES, cli, perfbench

HALF = """name: half
description: half the requests fail with a 500
ttft_ms: 20
itl_ms: 1
output_chars: 20
models:
  sim:
    tokens_per_char: {default: 0.25}
faults:
  error_500: 0.5
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_abort_on_stops_a_run_against_a_failing_server(tmp_path: Path) -> None:
    profile = tmp_path / "half.yaml"
    profile.write_text(HALF, encoding="utf-8")
    duration, grace = 60, 2
    done = cli("run", str(CASES / "answer.yaml"), "-t", f"mock:{profile}", "--retries", "0",
               "-c", "4", "--duration", str(duration), "--runs", "1", "--warmup", "0", "-q",
               "--abort-on", "p99>3600s,error_rate>20%", "--abort-grace", str(grace),
               "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 9, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "aborted by --abort-on: error_rate>20% (was " in said and "Exit 9" in said
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["stopped_by"].startswith("abort-on: error_rate>20% (was ")
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    ended = [s for s in samples if s["status"] != "cancelled"]
    assert len(ended) >= 10  # what was measured is kept
    span = max(s["end"] for s in samples) - min(s["start"] for s in samples)
    # checked every second once the grace is over: stopped long before the 60 s planned
    assert grace <= span < duration / 4, span


def test_the_metrics_page_answers_during_a_run(tmp_path: Path) -> None:
    port = free_port()
    args = perfbench("run", str(CASES / "answer.yaml"), "-t", "mock+http", "-c", "2",
                     "--duration", "120", "--runs", "1", "--warmup", "0", "-q",
                     "--metrics-port", str(port), "--out", str(tmp_path))  # fmt: skip
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    page = ""
    try:
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up and "perfbench_tasks_finished_total{" not in page:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    page = r.read().decode()
            except (urllib.error.URLError, ConnectionError):
                continue
    finally:
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    assert 'perfbench_tasks_finished_total{phase="measured",status="ok"}' in page, page[-2000:]
    assert "perfbench_tasks_in_flight" in page and "perfbench_task_latency_seconds_bucket" in page
    assert child.returncode == 130, out + err


def test_with_workers_nothing_is_in_flight_once_the_run_ends(tmp_path: Path) -> None:
    # Each worker's latest sample counted the tasks in flight when *it* started (itself too):
    # the fleet said 2 were in flight after a --workers 2 run, and the page 50 started of 48.
    # Real time (the workers are processes), as `run` does.
    spec = RunSpec(plan=Plan(runs=2, warmup=1, concurrency=4, workers=2), out=str(tmp_path),
                   target=TargetSpec(target="mock:zero"))  # fmt: skip
    telemetry = Telemetry(0)  # never served: read from its registry
    progress = Progress([telemetry])
    result = anyio.run(Session(spec, progress, suite=load_suite([CASES])).run)
    assert progress.snapshot()["concurrency"] == 0
    progress.finished(result.meta["status"], 0, None)
    assert result.run_dir is not None
    finished = len(list(store.read_samples(result.run_dir)))
    assert finished == 48 == telemetry.registry.get_sample_value("perfbench_tasks_started_total")
    assert telemetry.registry.get_sample_value("perfbench_tasks_in_flight") == 0


def test_with_workers_a_timed_pass_says_its_time_not_the_suites_size(tmp_path: Path) -> None:
    # The fleet announced a timed pass with the suite's size (`run 1: 4 tasks`, and `tasks: 4`
    # in phase_changed), one process with 0 tasks. It starts as many as its time allows.
    args = ["-c", "2", "--duration", "0.6", "--runs", "2", "--workers", "2", "--json"]
    done = cli("run", str(CASES / "answer.yaml"), "-t", "mock:zero", *args, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    phases = [(e["phase"], e["tasks"]) for e in events if e["event"] == "phase_changed"]
    assert phases == [("warmup", 4), ("measured", 0), ("measured", 0)], phases
    headers = [line for line in done.stderr.splitlines() if line.startswith("run ")]
    assert headers == ["run 1: tasks for 0.3 s", "run 2: tasks for 0.3 s"], done.stderr
