"""Smoke test of many-case memory (issue 38; the figures are tests/bench/many_cases.py's):
a synthetic suite of 2,000 prompts, each one task, grows perfbench's peak RSS by less than
1.25 times a 200-prompt run's whole peak. A ratio measured in the same test, so the machine
and the interpreter's own size cancel out. Measured (input=16,output=4): before the per-case
state was made small, 200 → 2,000 prompts went 121 → 309 MB (growth 1.54× the small run);
after, 106 → 211 MB (0.99×)."""

from __future__ import annotations

from pathlib import Path

from tests.bench.many_cases import RUN, measure


def _rss(n: int, folder: Path) -> float:
    spec = f"input=16,output=4,n={n}"
    rss, _, setup = measure(["run", "--synthetic", spec, *RUN, "--out", str(folder)], folder)
    assert setup is not None  # the pass started: the run was measured
    return rss


def test_ten_times_the_prompts_is_not_ten_times_the_memory(tmp_path: Path) -> None:
    small, large = _rss(200, tmp_path), _rss(2000, tmp_path)
    assert large - small < 1.25 * small, f"200 prompts: {small:.0f} MB, 2,000: {large:.0f} MB"
