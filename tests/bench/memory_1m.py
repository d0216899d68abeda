"""Memory over 1,000,000 tasks (`make bench`; asserts nothing).

One worker, the in-process zero-latency mock (the fastest way to a million tasks), 64 in flight,
10 measured runs of 100,000 tasks each, samples written to a run directory as in any run. The
resident set size is read every 50,000 tasks; the growth printed is from the first reading
(when the allocator, caches and histograms have warmed up) to the largest one.

Usage: python tests/bench/memory_1m.py [TASKS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from perfbench import host
from perfbench.engine.observer import RunObserver
from perfbench.engine.session import Session
from perfbench.sample import Sample
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import load_suite
from tests.helpers import CASES

EVERY = 50_000


def rss_mib() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    suite = load_suite([CASES / "answer.yaml"])  # 4 cases, no tools
    runs = 10
    repeat = total // runs // len(suite.cases)
    readings: list[tuple[int, float]] = []
    seen = 0

    class Memory(RunObserver):
        def sample(self, sample: Sample) -> None:
            nonlocal seen
            seen += 1
            if seen % EVERY == 0:
                readings.append((seen, rss_mib()))

    with tempfile.TemporaryDirectory() as tmp:
        plan = Plan(runs=runs, warmup=0, repeat=repeat, concurrency=64)
        spec = RunSpec(target=TargetSpec("mock:zero"), plan=plan, out=tmp)
        session = Session(spec, Memory(), suite=suite)
        start = time.perf_counter()
        result = anyio.run(session.run, backend_options=host.loop_options())
        wall = time.perf_counter() - start
        assert result.run_dir is not None
        size = (result.run_dir / "samples.jsonl").stat().st_size / 2**20
    first, peak = readings[0][1], max(r for _, r in readings)
    print(
        f"{seen:,} tasks in {wall:.0f} s ({seen / wall:,.0f}/s); RSS at {readings[0][0]:,} tasks "
        f"{first:.0f} MiB, at the end {readings[-1][1]:.0f} MiB, peak {peak:.0f} MiB: growth "
        f"{peak - first:+.1f} MiB (target < 50 MB); samples.jsonl {size:,.0f} MiB"
    )
    print("RSS by tasks: " + ", ".join(f"{n // 1000}k {r:.0f}" for n, r in readings[::4]))


if __name__ == "__main__":
    main()
