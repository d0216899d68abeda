"""Peak RSS of the readers of a 10^6-sample run (`make bench`-style; asserts nothing).

Makes a run of TASKS samples (`perfbench run cases/answer.yaml -t mock:zero`, 10 runs), then
measures with `/usr/bin/time -f %M`, each command in its own process:

- `run --resume` of a copy cut to 95% of its samples, without summary.json (interrupted);
- `show` of the finished run (summary.json) and of the interrupted copy (recomputed);
- `report` and `compare` of the finished run (summary.json only);
- `export --format parquet` of the finished run.

Issue 38's target: each ≤ 300 MB at 10^6 samples. Needs ~3 GB of free disk in the temp dir
(samples.jsonl is ~1 GB a copy); everything is deleted at the end.

With ``--cases N`` it measures instead a run of N one-task cases (`run --synthetic
"input=64,output=16,n=N" -t mock:zero --runs 1`): there it is summary.json that grows, ~36 KB
of text a case (365 MB at 10^4), read by `show`, `compare` and `report`.

Usage: python tests/bench/reader_memory.py [TASKS] | --cases N
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
RUNS = 10


def perfbench(*args: str, cwd: Path = ROOT) -> tuple[float, float]:
    """Peak RSS (MB) and wall time (s) of one perfbench command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "perfbench", *args]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return int(done.stderr.strip().splitlines()[-1]) / 1000, wall


def interrupted_copy(run: Path, to: Path, keep: float = 0.95) -> Path:
    """The run as if killed at ``keep`` of its samples: no summary.json, status interrupted."""
    to.mkdir()
    lines = sum(1 for _ in (run / "samples.jsonl").open("rb"))
    with (run / "samples.jsonl").open("rb") as src, (to / "samples.jsonl").open("wb") as dst:
        for n, line in enumerate(src):
            if n >= lines * keep:
                break
            dst.write(line)
    meta = orjson.loads((run / "meta.json").read_bytes())
    meta["status"], meta["id"] = "interrupted", to.name
    (to / "meta.json").write_bytes(orjson.dumps(meta))
    return to


def many_cases(cases: int) -> None:
    """The readers of a run of ``cases`` one-task cases, whose summary.json is the large file."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made = perfbench(
            "run", "--synthetic", f"input=64,output=16,n={cases}", "-t", "mock:zero", "--runs",
            "1", "--warmup", "0", "-q", "--out", str(root / "runs"),
        )  # fmt: skip
        run = next((root / "runs").iterdir())
        size = (run / "summary.json").stat().st_size / 2**20
        print(f"run of {cases:,} cases (summary.json {size:,.0f} MiB): {made[0]:.0f} MB, "
              f"{made[1]:.0f} s")  # fmt: skip
        rows = [
            ("show", perfbench("show", str(run))),
            ("compare", perfbench("compare", str(run), str(run))),
            ("report", perfbench("report", str(run), "-o", str(root / "report"))),
            ("export --format parquet", perfbench("export", str(run), "-f", "parquet")),
        ]
        for name, (rss, wall) in rows:
            print(f"{name:32} peak RSS {rss:6.0f} MB  wall {wall:6.1f} s")


def main() -> None:
    if sys.argv[1:2] == ["--cases"]:
        many_cases(int(sys.argv[2]))
        return
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    repeat = max(1, tasks // RUNS // 4)  # cases/answer.yaml has 4 cases
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made = perfbench(
            "run", "cases/answer.yaml", "-t", "mock:zero", "--runs", str(RUNS), "--warmup", "0",
            "--repeat", str(repeat), "--concurrency", "64", "-q", "--out", str(root / "runs"),
        )  # fmt: skip
        full = next((root / "runs").iterdir())
        size = (full / "samples.jsonl").stat().st_size / 2**20
        print(f"run of {RUNS * 4 * repeat:,} samples ({size:,.0f} MiB): {made[0]:.0f} MB, "
              f"{made[1]:.0f} s")  # fmt: skip
        cut = interrupted_copy(full, root / "cut")
        rows = [
            ("show (summary.json)", perfbench("show", str(full))),
            ("show (interrupted: recomputed)", perfbench("show", str(cut))),
            ("compare", perfbench("compare", str(full), str(full))),
            ("report", perfbench("report", str(full), "-o", str(root / "report"))),
            ("export --format parquet", perfbench("export", str(full), "-f", "parquet")),
            ("run --resume (95% done)", perfbench("run", "--resume", str(cut), "-q")),
        ]
        for name, (rss, wall) in rows:
            print(f"{name:32} peak RSS {rss:6.0f} MB  wall {wall:6.1f} s")
        shutil.rmtree(root / "runs")


if __name__ == "__main__":
    main()
