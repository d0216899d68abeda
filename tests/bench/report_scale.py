"""`perfbench report` at scale (`make bench`): two real runs of the in-process zero-latency mock
totalling 1,000,000 samples, then the report of both with a baseline comparison, in its own
process. Prints the report's wall time and peak resident memory. Asserts nothing.

Usage: python tests/bench/report_scale.py [TOTAL_SAMPLES]   (default 1,000,000)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERFBENCH = [sys.executable, "-m", "perfbench"]


def make_run(out: Path, label: str, repeat: int) -> None:
    cmd = [*PERFBENCH, "run", str(ROOT / "cases"), "-t", "mock:zero", "--runs", "5"]
    cmd += ["--warmup", "0", "--repeat", str(repeat), "--label", label, "--out", str(out), "-q"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def timed_report(out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one `perfbench report` process."""
    cmd = [*PERFBENCH, "report", "a", "b", "--baseline", "a", "--root", str(out)]
    cmd += ["--out", str(out / "report")]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    assert os.waitstatus_to_exitcode(status) == 0
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    cases = 16  # the shipped suite
    repeat = total // (2 * 5 * cases)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        started = time.perf_counter()
        for label in ("a", "b"):
            make_run(out, label, repeat)
        samples = sum(sum(1 for _ in p.open("rb")) for p in out.glob("*/samples.jsonl"))
        made = time.perf_counter() - started
        print(f"report_scale: {samples:,} samples in 2 runs (made in {made:.0f} s)")
        for attempt in range(3):
            elapsed, rss = timed_report(out)
            print(
                f"  perfbench report, attempt {attempt + 1}: "
                f"{elapsed:.2f} s, peak RSS {rss:.0f} MiB"
            )


if __name__ == "__main__":
    main()
