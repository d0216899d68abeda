"""Harness overhead and memory against the zero-latency in-process mock (`make bench`).

Figures are printed, not asserted: a noisy machine must not fail CI. Under plain `make test`
(benchmarks disabled) each body runs once on a small task count, so the code cannot rot."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import anyio
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from perfbench.engine.runner import Runner
from perfbench.mock.profile import load_profile
from perfbench.spec import Plan
from perfbench.stats.summary import Summarizer
from perfbench.store import SampleWriter
from perfbench.store.recorder import Recorder
from perfbench.suite import Suite, load_suite
from tests.helpers import write_suite

ONE_CASE = """
cases:
  - id: ping
    language: en
    input: ping
"""


def report(request: pytest.FixtureRequest, text: str) -> None:
    """Print past pytest's capture so `make bench` shows the figure."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(text)


def full(request: pytest.FixtureRequest) -> bool:
    opt = request.config.getoption
    return bool(opt("benchmark_enable")) or not opt("benchmark_disable")


def run_tasks(suite: Suite, tasks: int, samples_file: Path | None) -> tuple[float, float]:
    """Run ``tasks`` zero-latency tasks on asyncio; returns (wall, CPU) seconds, summary
    included (it is part of what a run costs)."""
    summarizer = Summarizer({"ping": 60.0})
    writer = SampleWriter(samples_file) if samples_file else None
    recorder = Recorder(summarizer, writer)
    runner = Runner(suite, _agent(), Plan(runs=1, warmup=0, repeat=tasks), recorder)
    wall, cpu = time.perf_counter(), time.process_time()
    anyio.run(runner.run)
    summarizer.finish()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if writer:
        writer.close()
    return wall, cpu


def _agent():  # type: ignore[no-untyped-def]
    from perfbench.targets.mock import MockAgent

    return MockAgent(load_profile("zero"), profile_name="zero")


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite([write_suite(tmp_path / "one.yaml", ONE_CASE)])


@pytest.mark.parametrize("to_disk", [False, True], ids=["memory", "samples.jsonl"])
def test_overhead_per_task(
    benchmark: BenchmarkFixture,
    request: pytest.FixtureRequest,
    suite: Suite,
    tmp_path: Path,
    to_disk: bool,
) -> None:
    tasks = 5_000 if full(request) else 200
    path = tmp_path / "samples.jsonl" if to_disk else None
    walls: list[float] = []
    cpus: list[float] = []

    def once() -> None:
        wall, cpu = run_tasks(suite, tasks, path)
        walls.append(wall / tasks)
        cpus.append(cpu / tasks)

    benchmark.pedantic(once, rounds=7 if full(request) else 1, iterations=1)
    wall_us, cpu_us = statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6
    benchmark.extra_info.update(
        per_task_wall_us=round(wall_us, 1), per_task_cpu_us=round(cpu_us, 1)
    )
    if full(request):
        disk = "with" if to_disk else "without"
        report(
            request,
            f"\nharness overhead per task ({disk} samples.jsonl), median of {len(walls)} rounds "
            f"of {tasks} tasks: {wall_us:.1f} µs wall, {cpu_us:.1f} µs CPU",
        )


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def test_memory_growth_over_many_tasks(
    request: pytest.FixtureRequest, suite: Suite, tmp_path: Path
) -> None:
    tasks = 100_000 if full(request) else 2_000
    run_tasks(suite, 100, tmp_path / "warm.jsonl")  # imports and caches before the baseline
    before = _rss_bytes()
    elapsed, _ = run_tasks(suite, tasks, tmp_path / "samples.jsonl")
    growth = _rss_bytes() - before
    with (tmp_path / "samples.jsonl").open() as fh:
        lines = sum(1 for _ in fh)
    assert lines == tasks  # every task reached disk
    if full(request):
        report(
            request,
            f"\n{tasks:,} zero-latency tasks in {elapsed:.1f} s: resident memory grew "
            f"{growth / 2**20:.1f} MiB",
        )
