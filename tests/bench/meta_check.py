"""Time and transient memory of checking a meta.json of many cases (asserts nothing).

Makes a small run (`perfbench run cases/answer.yaml -t mock:zero`), copies its first case to
CASES cases in its meta.json, and times, interleaved (best of 5 rounds each):

- ``pydantic``: ``store.documents.check_meta``, what perfbench checks meta.json with;
- ``hand-written``: the shape check of ``store/checks.py`` as it was at REV (``--before``).

Then the peak memory ``check_meta`` allocates (tracemalloc): pydantic builds the validated
copy of the document, which the reader does not keep.

Usage: python tests/bench/meta_check.py [CASES] --before REV
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfbench.store.documents import check_meta
from tests.bench.sample_lines import ROOT, hand_written_checks

ROUNDS = 5


def meta_of_a_run(folder: Path, cases: int) -> dict[str, Any]:
    suite = str(ROOT / "cases" / "answer.yaml")
    cmd = [sys.executable, "-m", "perfbench", "run", suite, "-t", "mock:zero", "--runs", "1",
           "--warmup", "0", "--out", str(folder), "-q"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    [meta_path] = folder.glob("*/meta.json")
    meta: dict[str, Any] = json.loads(meta_path.read_text())
    case = meta["suite"]["cases"][0]
    meta["suite"]["cases"] = [{**case, "id": f"case-{n}"} for n in range(cases)]
    return meta


def main() -> None:
    args = sys.argv[1:]
    rev = args.pop(args.index("--before") + 1) if "--before" in args else "3570f27"
    args = [a for a in args if a != "--before"]
    cases = int(args[0]) if args else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        meta = meta_of_a_run(Path(tmp), cases)
    old = hand_written_checks(rev)
    checks: dict[str, Callable[[], None]] = {
        "pydantic": lambda: check_meta(meta),
        "hand-written": lambda: old.check(meta, old.META),
    }
    best = dict.fromkeys(checks, float("inf"))
    for _ in range(ROUNDS):
        for name, check in checks.items():
            start = time.perf_counter()
            check()
            best[name] = min(best[name], time.perf_counter() - start)
    tracemalloc.start()
    check_meta(meta)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"meta.json of {cases} cases, best of {ROUNDS} rounds:")
    for name, seconds in best.items():
        print(f"  {name:<13} {seconds * 1000:8.1f} ms ({seconds / best['pydantic']:.2f}×)")
    print(f"  pydantic's check allocates {peak / 1e6:.1f} MB at its peak (freed after)")


if __name__ == "__main__":
    main()
