"""A report of many cases (issue 38) lists the slowest ``REPORT_CASES`` by P95 and says how
many it left out: its per-case table, the time split's and their charts' cases. A run of 10^5
prompts had a table of 10^5 rows and a chart of 10^5 bars."""

from __future__ import annotations

from typing import Any

from perfbench.report import time_split
from perfbench.report.listed import REPORT_CASES, listed
from perfbench.report.release_md import _case_table
from perfbench.sample import Sample
from perfbench.stats.summary import summarize

N = 2 * REPORT_CASES + 5


def _summary(slowest: int) -> Any:
    """One task a case, case ``k`` taking (1 + k) ms, but case ``slowest`` the slowest."""
    samples = [
        Sample(
            "measured", 0, f"c{k:03d}", 0, "en", 0.0, (1 + (10 * N if k == slowest else k)) / 1e3
        )
        for k in range(N)
    ]
    return summarize(samples, dict.fromkeys((s.case for s in samples), 5.0))


class View:
    def __init__(self, name: str, summary: Any) -> None:
        self.name, self.summary = name, summary


def test_the_slowest_cases_of_any_run_are_listed() -> None:
    a, b = _summary(slowest=0), _summary(slowest=1)
    shown = listed([a["across_runs"], b["across_runs"]])
    top = [f"c{k:03d}" for k in range(N - REPORT_CASES + 2, N)]
    assert shown == ["c000", "c001", *top]  # c000 is a's slowest, c001 b's


def test_the_report_s_tables_say_what_they_left_out() -> None:
    views = [View("a", _summary(slowest=0))]
    text = _case_table(views)  # type: ignore[arg-type]
    rows = [line for line in text.splitlines() if line.startswith("| `c")]
    assert len(rows) == REPORT_CASES and rows[0].startswith("| `c000`")
    more = N - REPORT_CASES
    assert f"… and {more} more cases: the {REPORT_CASES} slowest by P95 are listed" in text
    split = "\n".join(time_split.section([(v.name, v.summary) for v in views], None))
    assert sum(line.startswith("| c0") for line in split.splitlines()) == REPORT_CASES
    assert f"… and {more} more cases" in split


def test_a_few_cases_are_all_listed() -> None:
    summary = _summary(slowest=0)
    few = {
        **summary["across_runs"],
        "cases": dict(list(summary["across_runs"]["cases"].items())[:3]),
    }
    assert listed([few]) == ["c000", "c001", "c002"]
