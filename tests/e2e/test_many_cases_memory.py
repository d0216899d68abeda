"""Smoke test of issue 38 (tests/bench/many_cases.py has the figures): a run's memory grows
little with its number of cases. Peak RSS of a 1,000-case synthetic run against a 20-case one,
both measured here (an absolute bound would depend on the machine): 5.8x before the per-case
HDR histograms were freed and summary.json written by orjson, 1.6x after."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers import perfbench

RATIO = 2.5  # the fixed code's 1.6, with room; the leaks gave 2.7 (one fixed) and 5.8


def _peak_rss_kib(cases: int, out: Path) -> int:
    spec = f"input=64,output=16,n={cases}"
    args = ["run", "--synthetic", spec, "-t", "mock:zero", "--runs", "1", "--warmup", "0"]
    cmd = perfbench(*args, "--out", str(out), "-q")
    log = out.with_suffix(".stderr")
    with log.open("wb") as stderr:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the suite's
        except BaseException:
            child.kill()
            raise
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, log.read_text(errors="replace")
    return usage.ru_maxrss


def test_a_thousand_cases_need_little_more_memory_than_twenty(tmp_path: Path) -> None:
    few = _peak_rss_kib(20, tmp_path / "few")
    many = _peak_rss_kib(1000, tmp_path / "many")
    assert many < RATIO * few, f"peak RSS {many} KiB for 1,000 cases, {few} KiB for 20"
