"""How the noise in `ab`'s pairs shrinks with the tasks a run, for P50, P95 and P99 (issue 36).

Reads the runs of one `perfbench ab` (its --out folder) made with many tasks a run, and
recomputes each run's percentiles over its first k measured tasks (by start time), as a run
of k tasks would have given them, for each k asked; then the noise in the pairs as compare
computes it (stats/paired.py: the log-ratios' spread over √2). Prints figures, asserts nothing.

Usage: python tests/bench/ab_tail_noise.py AB_OUT_FOLDER 32 64 128
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from perfbench.stats import paired

QUANTILES = (50, 95, 99)


def latencies(run: Path) -> list[float]:
    """A run's measured, successful tasks' latencies, in the order they started."""
    found = []
    with (run / "samples.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            sample = json.loads(line)
            if sample["phase"] == "measured" and sample["status"] == "ok":
                found.append((sample["start"], sample["latency"]))
    return [latency for _, latency in sorted(found)]


def side(folder: Path, name: str) -> list[list[float]]:
    """One side's runs, in time order (ab's run folders start with their UTC time)."""
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and p.name.endswith(f"_{name}"))
    return [latencies(run) for run in runs]


def noise(base: list[list[float]], cand: list[list[float]], tasks: int, q: int) -> float | None:
    b = [float(np.percentile(run[:tasks], q)) for run in base]
    c = [float(np.percentile(run[:tasks], q)) for run in cand]
    return paired.noise(paired.differences(b, c))


def main() -> None:
    folder, sizes = Path(sys.argv[1]), [int(k) for k in sys.argv[2:]]
    base, cand = side(folder, "baseline"), side(folder, "candidate")
    pairs = min(len(base), len(cand))
    base, cand = base[:pairs], cand[:pairs]
    fewest = min(map(len, base + cand), default=0)
    print(f"{pairs} pairs, {fewest} tasks a run at least")
    for k in (k for k in sizes if k <= fewest):
        figures = [(q, noise(base, cand, k, q)) for q in QUANTILES]
        said = ", ".join(f"P{q} {'-' if n is None else f'{100 * n:.1f}%'}" for q, n in figures)
        print(f"{k} tasks a run: noise in the pairs {said}")


if __name__ == "__main__":
    main()
