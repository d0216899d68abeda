"""`perfbench run --workers N`: real worker processes, real sockets between them. Each test is
bounded (a small suite, a timeout on every child process)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from collections import Counter
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from perfbench import store
from perfbench.stats.summary import summarize
from perfbench.suite import load_suite
from tests.helpers import CASES, cli, perfbench

PACED = """
name: paced
ttft_ms: 20
itl_ms: 1
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
tool_latency_scale: 0.1
"""


def _run(
    tmp: Path, *args: str, timeout: float = 120
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp / "runs"
    proc = cli("run", str(CASES), "--out", str(out), "-q", *args, timeout=timeout)
    dirs = sorted(out.iterdir()) if out.exists() else []
    return (dirs[-1] if dirs else out), proc


def _without_client(summary: dict[str, Any]) -> dict[str, Any]:
    doc = dict(summary)
    doc.pop("client", None)
    return doc


def test_two_workers_split_the_load_and_the_summary_equals_the_samples(tmp_path: Path) -> None:
    run_dir, proc = _run(
        tmp_path, "-t", "mock:zero", "--workers", "2", "-c", "6", "--runs", "3", "--repeat", "7"
    )
    assert proc.returncode == 0, proc.stderr
    samples = list(store.read_samples(run_dir))
    keys = Counter(s.key for s in samples)
    # 16 cases × 7 repeats × (1 warmup + 3 measured) passes, every one exactly once.
    assert len(keys) == 16 * 7 * 4 and set(keys.values()) == {1}
    summary = json.loads((run_dir / "summary.json").read_text())
    suite = load_suite([CASES])
    recomputed = summarize(samples, {c.id: c.timeout_s for c in suite.cases})
    # Merged per-worker statistics are lossless: identical to one pass over all samples
    # (exact percentiles, throughput windows, token and cost sums, the HDR blobs).
    assert _without_client(summary) == json.loads(json.dumps(recomputed, default=dict))
    client = summary["client"]
    assert client["workers"] == 2 and len(client["worker_cpu_shares"]) == 2
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["plan"]["workers"] == 2 and meta["status"] == "completed"


def test_passes_do_not_overlap_across_workers(tmp_path: Path) -> None:
    run_dir, proc = _run(
        tmp_path, "-t", f"mock:{_profile(tmp_path)}", "--workers", "2", "-c", "4", "--runs", "2"
    )
    assert proc.returncode == 0, proc.stderr
    spans: dict[tuple[str, int], tuple[float, float]] = {}
    for s in store.read_samples(run_dir):
        lo, hi = spans.get((s.phase, s.run), (s.start, s.end))
        spans[(s.phase, s.run)] = (min(lo, s.start), max(hi, s.end))
    order = [spans[("warmup", 0)], spans[("measured", 0)], spans[("measured", 1)]]
    # One timeline for both processes, and each pass starts after the previous one ended.
    for (_, end), (start, _) in itertools.pairwise(order):
        assert start >= end


def test_open_loop_schedules_interleave_into_the_single_process_schedule(tmp_path: Path) -> None:
    args = ["-t", "mock:zero", "--rate", "400", "--duration", "0.5", "--runs", "1"]
    run_dir, proc = _run(tmp_path, *args, "--warmup", "0", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    one_dir, proc = _run(tmp_path / "one", *args, "--warmup", "0", "--workers", "1")
    assert proc.returncode == 0, proc.stderr

    two, one = offsets(run_dir), offsets(one_dir)
    assert len(two) == len(one) == 200
    assert two == pytest.approx(one, abs=1e-4)  # the same arrivals, shared between processes
    keys = Counter(s.key for s in store.read_samples(run_dir))
    assert set(keys.values()) == {1}


def offsets(path: Path) -> list[float]:
    """A run's arrivals, from its first: an open-loop schedule, comparable across runs."""
    scheduled = sorted(s.scheduled or 0.0 for s in store.read_samples(path))
    return [round(t - scheduled[0], 6) for t in scheduled]


def test_workers_share_the_parents_mock_server(tmp_path: Path) -> None:
    run_dir, proc = _run(
        tmp_path, "-t", "mock+http:zero", "--workers", "2", "-c", "4", "--runs", "2"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = summary["pooled"]["overall"]
    assert overall["ok"] == overall["tasks"] == 32
    assert overall["model_calls"] > 1  # tool cases went through the agent loop over HTTP


RPM = """
name: rpm
ttft_ms: 50
itl_ms: 2
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
rate_limits: {requests_per_minute: 1200, burst_s: 1}
"""


NO_RAY = pytest.mark.skipif(find_spec("ray") is None, reason="the ray extra is not installed")


@pytest.mark.parametrize(
    ("workers", "extra"),
    [("1", ()), ("2", ()), pytest.param("2", ("--ray", "local"), marks=NO_RAY, id="2-ray")],
)
def test_adaptive_load_over_workers_follows_one_limit(
    tmp_path: Path, workers: str, extra: tuple[str, ...]
) -> None:
    """Against 1,200 requests per minute (20/s), two workers under one AIMD controller settle
    near 20/s as one process does, rather than each finding its own limit; as Ray actors
    (--ray local) too. (With one process this once failed through the CLI: the client kept
    one connection for -c 1, so requests queued in the pool and never reached the limit.)"""
    profile = tmp_path / "rpm.yaml"
    profile.write_text(RPM)
    suite = tmp_path / "s.yaml"
    suite.write_text("cases:\n  - {id: c, language: en, input: hi}\n")
    out = tmp_path / "runs"
    args = ["run", str(suite), "-t", f"mock+http:{profile}", "--adaptive", "--workers", workers]
    args += ["--max-concurrency", "64", "--repeat", "240", "--runs", "1", "--warmup", "0"]
    proc = cli(*args, *extra, "--out", str(out), "-q", timeout=180)
    assert proc.returncode == 0, proc.stderr
    [run_dir] = list(out.iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = summary["runs"][0]["overall"]
    assert overall["throughput"] == pytest.approx(20.0, rel=0.15)
    limits = [limit for _, limit in summary["adaptive"]["history"]]
    # It grew, met 429s and came down at least once. (Not "ends below its peak": under load
    # the window's 429s can stop long enough for the limit to climb back to its peak by the
    # last task, as a CI run's [1, 2, 4, 8, 6, 7, ..., 8] did.)
    assert limits[0] < max(limits)
    assert any(later < earlier for earlier, later in itertools.pairwise(limits)), limits
    assert summary["client"].get("workers", 1) == int(workers)
    assert overall["throttled"] > 0


def test_bad_workers_value_is_a_usage_error(tmp_path: Path) -> None:
    _, proc = _run(tmp_path, "-t", "mock:zero", "--workers", "zero")
    assert proc.returncode == 2
    assert "--workers takes a positive number or auto" in proc.stderr


def _profile(tmp: Path) -> Path:
    path = tmp / "paced.yaml"
    path.write_text(PACED)
    return path


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def _start(tmp: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp / "runs"
    cmd = perfbench("run", str(CASES), "--out", str(out), *args)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, out


def _wait_for_measuring(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("run 1:"):
            return
    raise AssertionError("the run ended before its measured phase")


def test_ctrl_c_stops_every_worker_and_the_run_resumes(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    args = ("-t", f"mock:{profile}", "--workers", "2", "-c", "4", "--runs", "30")
    proc, out = _start(tmp_path, *args)
    try:
        _wait_for_measuring(proc)
        time.sleep(0.3)
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    for pid in workers:  # no worker outlives its run
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)
    [run_dir] = list(out.iterdir())
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "interrupted"
    before = [s for s in store.read_samples(run_dir) if s.status != "cancelled"]
    assert before

    resumed = cli("run", "--resume", str(run_dir), "-q")
    assert resumed.returncode == 0, resumed.stderr
    keys = Counter(s.key for s in store.read_samples(run_dir))
    assert len(keys) == 16 * 31 and set(keys.values()) == {1}
    assert json.loads((run_dir / "meta.json").read_text())["status"] == "completed"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return "gone"


def test_a_worker_that_dies_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    proc, out = _start(tmp_path, "-t", f"mock:{profile}", "--workers", "2", "--runs", "30")
    try:
        _wait_for_measuring(proc)
        victim = _children(proc.pid)[0]
        os.kill(victim, signal.SIGKILL)
        _stdout, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 3, stderr
    assert "worker" in stderr and "died (exit code -9)" in stderr
    assert "Traceback" not in stderr
    [run_dir] = list(out.iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "failed" and "died" in meta["error"]
    assert list(store.read_samples(run_dir))  # what was measured before is kept


def test_a_sweep_runs_each_level_in_the_workers_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    proc = cli("sweep", str(CASES / "answer.yaml"), "-t", "mock:zero", "-c", "2,4",
               "--runs", "1", "--workers", "2", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [sweep_dir] = list(out.iterdir())
    for level in ("level-2", "level-4"):
        meta = json.loads((sweep_dir / level / "meta.json").read_text())
        assert meta["plan"]["workers"] == 2 and meta["status"] == "completed"
        summary = json.loads((sweep_dir / level / "summary.json").read_text())
        assert summary["client"]["workers"] == 2
        assert summary["pooled"]["overall"]["ok"] == 4
    plan = json.loads((sweep_dir / "sweep-plan.json").read_text())
    assert plan["plan"]["workers"] == 2  # a resumed sweep keeps them


SLOW = """
name: slow
ttft_ms: 300
itl_ms: 0
output_chars: 4
models: {sim: {tokens_per_char: {default: 0.25}}}
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_open_loop_never_waits_on_the_clients_connection_pool(
    tmp_path: Path, workers: str
) -> None:
    """40 tasks/s of 300 ms each keeps ~12 in flight: the client must open that many
    connections (it once kept one per -c, so tasks queued behind each other for seconds)."""
    profile = tmp_path / "slow.yaml"
    profile.write_text(SLOW)
    suite = tmp_path / "s.yaml"
    suite.write_text("cases:\n  - {id: c, language: en, input: hi}\n")
    out = tmp_path / "runs"
    args = ["run", str(suite), "-t", f"mock+http:{profile}", "--rate", "40", "--duration", "1"]
    args += ["--runs", "1", "--warmup", "0", "--workers", workers]
    proc = cli(*args, "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    [run_dir] = list(out.iterdir())
    done = list(store.read_samples(run_dir))
    assert len(done) == 40 and {s.status for s in done} == {"ok"}
    waits = sorted(st.wait or 0.0 for s in done for st in s.steps)
    # One connection made the median wait 5.8 s; bounds far from both, for a loaded machine.
    assert waits[len(waits) // 2] < 1.0
    assert sorted(s.latency for s in done)[20] < 1.5
    reported = json.loads((run_dir / "summary.json").read_text())["runs"][0]["overall"]["wait"]
    assert reported["n"] == 40 and reported["p50"] < 1.0  # what summary.json says of it


def test_the_live_count_in_flight_covers_every_worker(tmp_path: Path) -> None:
    """Each sample carries its own worker's count (4 of the 8 here); the progress events must
    show the whole run's."""
    args = ["run", str(CASES / "answer.yaml"), "-t", f"mock:{_profile(tmp_path)}", "-c", "8"]
    args += ["--workers", "2", "--runs", "1", "--warmup", "0", "--repeat", "150", "--json"]
    proc = cli(*args, "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    ticks = [e["concurrency"] for e in events if e["event"] == "progress"][:-1]  # not the end's
    assert ticks and max(ticks) > 4


def test_the_first_pass_waits_for_every_workers_target(tmp_path: Path) -> None:
    # Each worker imports this agent for a second before its target is open; the first go
    # went out before that, so the first tasks started a second late (start_late_s ≈ 1.0).
    agents = Path(__file__).parents[1] / "fixtures" / "agents"
    env = {**os.environ, "PYTHONPATH": str(agents)}
    out = tmp_path / "runs"
    proc = cli("run", str(CASES), "--out", str(out), "-q", "-t", "python:slow_start_agent:agent",
               "--workers", "2", "-c", "2", "--runs", "1", "--warmup", "0", env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = list(out.iterdir())
    client = json.loads((run_dir / "summary.json").read_text())["client"]
    assert client["workers"] == 2 and client["start_late_s"] is not None
    assert client["start_late_s"] < 0.5, client


def test_ray_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    proc = cli("run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--ray", "local",
               "--out", str(tmp_path / "runs"), "-q", env=env)  # fmt: skip
    assert proc.returncode != 0 and "pip install 'perfbench-llm[ray]'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
