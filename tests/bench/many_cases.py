"""Peak RSS, set-up time and wall time against the number of cases (issue 38; asserts
nothing).

Each workload runs as its own `python -m perfbench` process, its peak RSS read from that
process's rusage (``os.wait4``): synthetic suites and hand-written case files through
`run -t mock:zero --runs 1 --warmup 0`, and `cases check` of a large file. Set-up is the time
from starting the process to its first pass starting (the `phase_changed` event of `--json`,
written just before the first request goes out).

Usage: python tests/bench/many_cases.py [CASES ...]   (default: 10000 100000)
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


def measure(args: list[str], out: Path) -> tuple[float, float, float | None]:
    """Peak RSS (MB), wall time (s) and set-up time (s; None without a pass) of
    ``perfbench ARGS``; its stdout (the event stream, for `run`) is read as it comes."""
    cmd = [sys.executable, "-m", "perfbench", *args]
    start = time.perf_counter()
    setup = None
    with (out / "stderr.txt").open("wb") as stderr:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, cwd=out, env=_env())
        with child.stdout as events:  # type: ignore[union-attr]
            for line in events:
                if setup is None and FIRST in line.replace(b" ", b""):
                    setup = time.perf_counter() - start
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit((out / "stderr.txt").read_text(errors="replace"))
    return usage.ru_maxrss / 1024, wall, setup


def _env() -> dict[str, str]:
    """This checkout's perfbench first in the child's path (it runs in another folder)."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def written(folder: Path, n: int) -> Path:
    """A case file of ``n`` hand-written-looking cases (language given, as most suites do)."""
    rows = (
        f"  - id: case-{i:05d}\n    language: en\n    tags: [t{i % 7}]\n"
        f'    input: "Summarise item {i} of the quarterly report in two sentences."\n'
        "    max_tokens: 32\n"
        for i in range(n)
    )
    path = folder / f"cases-{n}.yaml"
    path.write_text("cases:\n" + "".join(rows), encoding="utf-8")
    return path


def row(workload: str, rss: float, wall: float, setup: float | None) -> None:
    before = "" if setup is None else f"{setup:.1f} s"
    print(f"{workload:<44} {rss:>7.0f} MB {before:>8} {wall:>7.1f} s", flush=True)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000]
    print(f"{'workload':<44} {'peak RSS':>10} {'set-up':>8} {'wall':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = ["--out", str(folder / "runs")]
        for n in sizes:
            spec = f"input=64,output=16,n={n}"
            row(
                f"run --synthetic {spec}",
                *measure(["run", "--synthetic", spec, *RUN, *runs], folder),
            )
        for n in sizes:
            cases = str(written(folder, n))
            row(f"run of {n} hand-written cases", *measure(["run", cases, *RUN, *runs], folder))
        big = str(written(folder, 10_000))
        row("cases check of 10,000 cases", *measure(["cases", "check", big], folder))


if __name__ == "__main__":
    main()
