"""Set-up of a generated workload: the time from starting `perfbench run --synthetic` to its
first pass starting (the `phase_changed` event of `--json`, written just before the first
request goes out), the process killed there: the rest of a 10^5-prompt run is minutes that
tell nothing about set-up (issue 38; asserts nothing). `tests/bench/many_cases.py` runs
each workload to its end, for peak RSS and wall.

Usage: python tests/bench/setup_time.py [N ...]   (default: 10000 100000)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = ["-t", "mock:zero", "--runs", "1", "--warmup", "0", "-q", "--json"]
FIRST = b'"event":"phase_changed"'
ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 1200.0  # a set-up not done by then is reported as such, and the process killed


def setup(n: int, out: Path) -> float | None:
    """Seconds to the first pass of ``--synthetic input=64,output=16,n=N`` (None: the
    process ended, or ``BOUND_S`` passed, first)."""
    spec = f"input=64,output=16,n={n}"
    cmd = [sys.executable, "-m", "perfbench", "run", "--synthetic", spec, *RUN, "--out", str(out)]
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    timer = _Watchdog(child, BOUND_S)
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if FIRST in line.replace(b" ", b""):
                return time.perf_counter() - start
        return None
    finally:
        timer.cancel()
        child.kill()
        child.wait()


class _Watchdog:
    """Kills ``child`` after ``seconds`` (a read of its output would otherwise wait on)."""

    def __init__(self, child: subprocess.Popen[bytes], seconds: float) -> None:
        import threading

        self._timer = threading.Timer(seconds, child.kill)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000]
    load = os.getloadavg()[0]
    print(f"{ROOT} · load average {load:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            took = setup(n, Path(tmp) / "runs")
            shown = "did not start" if took is None else f"{took:.1f} s"
            print(f"run --synthetic input=64,output=16,n={n:<8} set-up {shown}", flush=True)


if __name__ == "__main__":
    main()
