"""What Ray actors give and cost (issue 25; asserts nothing): closed-loop throughput of the
in-process zero mock (`-t mock:zero`, so the workers' own CPU is the limit) with 1 and 2 Ray
actors (`--ray local`) and with 1 and 2 local worker processes (`--workers`), and each one's
client CPU per task (the workers' CPU summed, over the measured tasks).

The four are alternated three times in one sitting; each figure is the median of the three.
A Ray run starts (and stops) its own local instance, which is not timed: throughput is the
measured passes' own.

Usage: python tests/bench/ray_scaling.py [--quick]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from perfbench import api
from perfbench.spec import Plan, RunSpec, TargetSpec

CASES = Path(__file__).resolve().parents[2] / "cases"
SIDES = {"ray 1": ("local", 1), "ray 2": ("local", 2), "local 1": (None, 1), "local 2": (None, 2)}


def measure(ray: str | None, workers: int, repeat: int, out: Path) -> dict[str, float]:
    plan = Plan(runs=2, warmup=1, repeat=repeat, concurrency=64, workers=workers, ray=ray)
    spec = RunSpec.build([CASES], TargetSpec("mock:zero"), plan, out=out)
    result = api.run(spec, interruptible=False)
    summary: dict[str, Any] = result.summary
    tasks = sum(r["overall"]["tasks"] for r in summary["runs"])
    throughput = statistics.median(r["overall"]["throughput"] for r in summary["runs"])
    client = summary["client"]
    return {"tasks_per_s": throughput, "cpu_us_per_task": client["cpu_s"] / tasks * 1e6}


def main() -> None:
    quick = "--quick" in sys.argv
    repeat = 40 if quick else 160  # 16 cases: 640 or 2,560 tasks a pass
    figures: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(1 if quick else 3):
            for side, (ray, workers) in SIDES.items():
                figures[side].append(measure(ray, workers, repeat, Path(tmp) / "runs"))
    print(f"\n-t mock:zero -c 64, {repeat * 16} tasks a pass (median of {len(figures['ray 1'])})")
    print(f"{'side':<10}{'tasks/s':>12}{'CPU µs/task':>14}")
    med = {}
    for side, runs in figures.items():
        med[side] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{side:<10}{med[side]['tasks_per_s']:>12.0f}{med[side]['cpu_us_per_task']:>14.1f}")
    print(f"2 Ray actors / 1: {med['ray 2']['tasks_per_s'] / med['ray 1']['tasks_per_s']:.2f}x")
    print(f"2 workers / 1:    {med['local 2']['tasks_per_s'] / med['local 1']['tasks_per_s']:.2f}x")
    extra = med["ray 2"]["cpu_us_per_task"] - med["local 2"]["cpu_us_per_task"]
    print(f"Ray's CPU per task beyond local workers (2 each): {extra:+.1f} µs")


if __name__ == "__main__":
    main()
