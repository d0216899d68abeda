"""Smoke test of issue 38 (tests/bench/many_cases.py has the figures): a run's memory grows
little with its number of cases. Peak RSS of a 2,000-prompt synthetic run (one task a case)
against a 200-prompt one, both measured here, so the machine and the interpreter's own size
cancel out (an absolute bound would depend on them). The growth from 200 to 2,000 prompts,
as a share of the 200-prompt run's whole peak: 1.54 (121 → 309 MB) before a case's state was
made proportional to what it recorded, 0.99 (106 → 211 MB) after; 0.27 (106 → 135 MB) with
the code of that time on today's machine and interpreter, 0.10 (104 → 115 MB) once each case's
figures were kept packed when its run closes (stats/summary.CaseFigures). Earlier, 1,000
cases against 20 were 5.8x, then 1.6x, once the per-case HDR histograms were freed."""

from __future__ import annotations

from pathlib import Path

from tests.bench.many_cases import RUN, measure

GROWTH = 0.18  # the packed figures' 0.10, with room; before them, 0.27


def _peak_rss_mb(n: int, folder: Path) -> float:
    spec = f"input=16,output=4,n={n}"
    rss, _, setup = measure(["run", "--synthetic", spec, *RUN, "--out", str(folder)], folder)
    assert setup is not None  # the pass started: the run was measured
    return rss


def test_ten_times_the_prompts_need_little_more_memory(tmp_path: Path) -> None:
    small, large = _peak_rss_mb(200, tmp_path), _peak_rss_mb(2000, tmp_path)
    assert large - small < GROWTH * small, f"200 prompts: {small:.0f} MB, 2,000: {large:.0f} MB"
