"""`run` prints one screen by default: a compact per-case table, the warnings, and the headline
last, where the terminal leaves it; `--details` (and `show --details`) print every table. Before,
`run cases/ --runs 2` printed about 130 lines at 80 columns with the headline at the top."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.helpers import CASES, cli

DETAIL_TITLES = ("Per language", "Tokens and cost per language", "Per run", "Streaming")


def _at(columns: int) -> dict[str, str]:
    return {**os.environ, "COLUMNS": str(columns)}


def test_a_run_fits_one_screen_with_the_headline_last(tmp_path: Path) -> None:
    done = cli("run", str(CASES), "--runs", "2", "-t", "mock:zero", "-q", "--out", str(tmp_path),
               env=_at(80))  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) <= 35, done.stdout
    assert max(len(line) for line in lines) <= 80
    tail = " ".join(lines[-4:])
    assert re.search(r"[\d,.]+ (\(.*\) )?tasks/s · [\d,]+ output tokens/s", tail), tail
    assert "errors 0.0%" in tail and "cost unpriced" in tail
    assert re.search(r"P50 [\d.]+ ms .*P95 .*P99 .*TTFT P50", tail), tail
    assert "workflow-es" in done.stdout and "32/32" in done.stdout  # every case, then all
    assert not any(title in done.stdout for title in DETAIL_TITLES)
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    shown = cli("show", str(run_dir), "--details", env=_at(80))
    assert shown.returncode == 0, shown.stderr
    assert all(title in shown.stdout for title in DETAIL_TITLES), shown.stdout
    assert "tasks/s" in " ".join(shown.stdout.splitlines()[-4:])


def test_details_prints_every_table_and_no_tag_row_twice(tmp_path: Path) -> None:
    done = cli("run", str(CASES), "--runs", "1", "-t", "mock:zero", "-q", "--details",
               "--out", str(tmp_path), env=_at(120))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert all(title in done.stdout for title in DETAIL_TITLES), done.stdout
    # faq and no-tools tag the same four cases: one row, not two identical ones
    assert "faq = no-tools" in done.stdout
    assert not re.search(r"│ no-tools\s+│", done.stdout)
