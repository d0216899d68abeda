"""`sweep` takes `run`'s watching flags where they mean something for a sweep: `--abort-on`
cuts the level short and ends the sweep (exit 9, which level and which limit said),
`--metrics-port` serves one page for all the levels, `--details` prints each level's tables;
`--stages` (a load over time, where each level holds one load) is refused."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from perfbench import api, store
from perfbench.cli import watching
from perfbench.cli.sweep import _SweepWatch
from perfbench.engine.observer import RunObserver
from perfbench.engine.sweep import Sweep
from perfbench.sample import Sample
from perfbench.spec import Plan, SweepPlan, SweepSpec, TargetSpec
from perfbench.store.sweeps import PLAN_FILE
from perfbench.suite import load_suite
from perfbench.targets.mock import MockAgent
from tests.e2e.test_live_limits import HALF, free_port
from tests.helpers import CASES, cli, fixed_profile

ANSWER = str(CASES / "answer.yaml")


def test_stages_are_refused_saying_what_a_sweep_takes(tmp_path: Path) -> None:
    done = cli("sweep", ANSWER, "-t", "mock:zero", "--stages", "1s:2", "--out", str(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.replace("│", " ").split())  # out of typer's error box
    assert "--stages is for run" in said and "--concurrency or --rates" in said, said
    assert not any(tmp_path.iterdir())  # refused before any level ran


def test_abort_on_ends_the_sweep_at_the_level_that_crossed_it(tmp_path: Path) -> None:
    profile = tmp_path / "half.yaml"
    profile.write_text(HALF, encoding="utf-8")
    # 240 tasks of >= 20 ms, 2 at a time: >= 2.4 s, checked every second after 0 s of grace.
    done = cli("sweep", ANSWER, "-t", f"mock:{profile}", "-c", "2,4", "--repeat", "60",
               "--runs", "1", "--warmup", "0", "--retries", "0", "-q",
               "--abort-on", "error_rate>10%", "--abort-grace", "0",
               "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 9, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "aborted at level 2 by --abort-on: error_rate>10% (was " in said, said
    (sweep_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((sweep_dir / PLAN_FILE).read_text())["status"] == "interrupted"
    meta = json.loads((sweep_dir / "level-2" / "meta.json").read_text())
    assert meta["stopped_by"].startswith("abort-on: error_rate>10% (was ")
    samples = (sweep_dir / "level-2" / "samples.jsonl").read_text().splitlines()
    assert 10 <= len(samples) < 240  # what was measured is kept, the rest never ran
    assert not (sweep_dir / "level-4").exists()  # the sweep ended with the level


class _StopsLevel(RunObserver):
    """Stops the ``n``-th level's run at its first measured task, as --abort-on would."""

    def __init__(self, n: int) -> None:
        self.n, self.runs = n, 0
        self._stop = lambda reason: None

    def controls(self, stop):  # type: ignore[no-untyped-def]
        self._stop = stop

    def run_started(self, meta, planned, engine):  # type: ignore[no-untyped-def]
        self.runs += 1

    def sample(self, sample: Sample) -> None:
        if self.runs == self.n and sample.phase == "measured":
            self._stop("abort-on: p95>1s (was 2.00 s)")


@pytest.mark.anyio
async def test_a_level_stopped_by_its_observer_keeps_the_levels_before(tmp_path: Path) -> None:
    suite = load_suite([CASES / "answer.yaml"])
    plan = SweepPlan(base=Plan(runs=1, warmup=0), levels=(1, 2, 4))
    spec = SweepSpec(plan=plan, out=str(tmp_path))
    sweep = Sweep(spec, _StopsLevel(2), suite=suite, factory=lambda n: MockAgent(fixed_profile()))
    result = await sweep.run()
    assert result.interrupted and [v.level for v in result.levels] == [1]
    assert (result.stopped_by, result.stopped_at) == ("abort-on: p95>1s (was 2.00 s)", 2)
    assert not (result.path / "level-4").exists()


def test_one_metrics_page_serves_every_level(tmp_path: Path) -> None:
    plan = SweepPlan(base=Plan(runs=1, warmup=0), levels=(1, 2))
    spec = SweepSpec((ANSWER,), TargetSpec("mock:zero"), plan, out=str(tmp_path))
    port = free_port()
    with watching.served(port, every_run=True) as page:
        result = api.sweep(spec, _SweepWatch(page, None))
        # still served once both levels ended: the page is the sweep's, not a level's
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    tasks = sum(len(list(store.read_samples(result.path / f"level-{n}"))) for n in (1, 2))
    assert tasks == 8  # answer.yaml's 4 cases at each level
    assert f"perfbench_tasks_started_total {tasks:.1f}" in text, text[-2000:]
    assert text.count("perfbench_run_info{") == 1  # the level measured last only


def test_the_metrics_port_is_the_sweeps_flag(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = cli("sweep", ANSWER, "-t", "mock:zero", "-c", "1", "--runs", "1",
                   "--metrics-port", str(port), "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr  # perfbench's own error: exit 3
    assert f"--metrics-port {port}: cannot listen" in " ".join(done.stderr.split())
    assert not any(tmp_path.iterdir())  # a busy port stops it before any level


def test_details_prints_each_levels_tables(tmp_path: Path) -> None:
    args = ["sweep", ANSWER, "-t", "mock:zero", "-c", "1,2", "--runs", "2", "--warmup", "0"]
    shown = cli(*args, "--details", "--out", str(tmp_path / "a"), env=_wide())
    short = cli(*args, "--out", str(tmp_path / "b"), env=_wide())
    assert shown.returncode == short.returncode == 0, shown.stderr + short.stderr
    for level in (1, 2):  # each level's run: where it is, and its per-run table
        assert f"level-{level}" in shown.stdout
    assert shown.stdout.count("Per run") == 2, shown.stdout
    assert "Per run" not in short.stdout and "level-1 " not in short.stdout


def _wide() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "200"}
