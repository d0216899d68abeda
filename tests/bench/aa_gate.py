"""The release gate's error rates on the shipped demo suite (prints figures, asserts nothing).

1. A/A: `perfbench run cases/ --runs 5` twice with the same code and a different `--seed` per
   side, then `perfbench compare` with default settings, with and without `--strict`. The
   issue asks for exit 0 in at least 19 of 20 pairs.
2. 20% slower: the candidate runs a copy of `mocks/default.yaml` with TTFT, inter-token and
   tool latencies ×1.2; the issue asks for exit 4 in at least 19 of 20 pairs.

The runs are made once into FOLDER (kept, so the comparison can be re-run after a change to
the gate with `--compare-only`). Runs are sleep-bound (about 45 s each, ~2 s of CPU), so
`--parallel` of them at once do not crowd each other.

Usage: python tests/bench/aa_gate.py FOLDER [--pairs 20] [--parallel 10] [--target mock]
                                     [--compare-only]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers import CASES, perfbench

MOCKS = CASES.parent / "mocks"
SLOWER = 1.2


def slow_profile(folder: Path) -> Path:
    """mocks/default.yaml with every latency ×1.2 (TTFT, inter-token gaps, tools)."""
    text = (MOCKS / "default.yaml").read_text()
    for old, new in (
        ("name: default", "name: slow20"),
        ("{median: 60, p99: 200}", "{median: 72, p99: 240}"),
        ("{median: 1.5, p99: 5}", "{median: 1.8, p99: 6}"),
        ("tool_latency_scale: 1.0", f"tool_latency_scale: {SLOWER}"),
    ):
        assert old in text, old  # the default profile changed: update this script
        text = text.replace(old, new)
    path = folder / "slow20.yaml"
    path.write_text(text)
    return path


def make_run(root: Path, target: str, seed: int, label: str) -> None:
    if any(root.glob(f"*_{label}")):  # made by an earlier sitting
        return
    cmd = perfbench("run", str(CASES), "--runs", "5", "-t", target, "--seed", str(seed),
                    "--label", label, "--out", str(root), "-q")  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)


def make_runs(folder: Path, pairs: int, parallel: int, target: str) -> None:
    slow = f"{target.split(':')[0]}:{slow_profile(folder)}"
    jobs = []
    for i in range(pairs):
        jobs += [(target, 1000 + i, f"base{i:02}"), (target, 2000 + i, f"same{i:02}")]
        jobs += [(slow, 3000 + i, f"slow{i:02}")]
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda job: make_run(folder / "runs", *job), jobs))


def compare(folder: Path, base: str, cand: str, *flags: str) -> int:
    cmd = perfbench("compare", base, cand, "--root", str(folder / "runs"), *flags)
    return subprocess.run(cmd, check=False, capture_output=True, timeout=120).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--target", default="mock", help="mock (in process) or mock+http")
    parser.add_argument("--compare-only", action="store_true")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    if not args.compare_only:
        make_runs(args.folder, args.pairs, args.parallel, args.target)
    tally: dict[str, Counter[int]] = {"a/a": Counter(), "a/a --strict": Counter()}
    tally["20% slower"] = Counter()
    for i in range(args.pairs):
        tally["a/a"][compare(args.folder, f"base{i:02}", f"same{i:02}")] += 1
        tally["a/a --strict"][compare(args.folder, f"base{i:02}", f"same{i:02}", "--strict")] += 1
        tally["20% slower"][compare(args.folder, f"base{i:02}", f"slow{i:02}")] += 1
    for name, codes in tally.items():
        counts = ", ".join(f"exit {code}: {n}" for code, n in sorted(codes.items()))
        print(f"{name:>13} ({args.pairs} pairs, target {args.target}): {counts}")


if __name__ == "__main__":
    main()
