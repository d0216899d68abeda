"""With `--repeat 1` a case's P50 equalled its P95 (one task a run): a percentile over fewer
tasks than 1 / (1 - q) is the slowest task, and is marked where it is printed."""

from __future__ import annotations

from perfbench.report.console import case_table
from perfbench.report.format import THIN, THIN_NOTE, thin
from perfbench.report.release_md import _case_table
from perfbench.sample import Sample
from perfbench.stats.summary import summarize


def test_a_percentile_needs_its_tasks() -> None:
    assert thin(19, "p95") and not thin(20, "p95")
    assert thin(99, "p99") and not thin(100, "p99")
    assert thin(1, "p50") and not thin(2, "p50")
    assert not thin(None, "p95") and not thin(3, "mean")


def _summary(repeat: int) -> dict:  # type: ignore[type-arg]
    samples = [
        Sample("measured", run, case, i, "en", 0.0, 0.1 + 0.01 * i + 0.001 * run)
        for run in range(3)
        for case in ("a", "b")
        for i in range(repeat)
    ]
    return summarize(samples, {"a": 5.0, "b": 5.0})


META = {"suite": {"cases": [{"id": c, "language": "en", "tools": 0} for c in ("a", "b")]}}


def test_the_console_marks_a_cases_thin_percentiles() -> None:
    once = case_table(_summary(1), META)  # 3 tasks a case: P95 and P99 are the maximum
    row = once.rows[0]
    p50, p95, p99 = row[4:7]
    assert not p50.endswith(THIN) and p95.endswith(THIN) and p99.endswith(THIN)
    assert once.caption == THIN_NOTE
    many = case_table(_summary(40), META)  # 120 tasks a case: every percentile means it
    assert all(THIN not in str(c) for r in many.rows for c in r) and many.caption is None


def test_the_report_marks_a_cases_thin_percentiles_per_run() -> None:
    """The report's per-case figures are each run's (medians across runs): with --repeat 1 a
    run's P50 is its one task, as its P95 is."""

    def cells(repeat: int) -> tuple[str, str, str]:
        class View:
            name, summary = "r", _summary(repeat)

        text = _case_table([View()])  # type: ignore[list-item]
        row = next(line for line in text.splitlines() if line.startswith("| `a`"))
        p50, p95 = (c.strip() for c in row.strip("|").split("|")[1:3])
        return p50, p95, text

    p50, p95, text = cells(1)
    assert p50.endswith(THIN) and p95.endswith(THIN) and THIN_NOTE in text
    p50, p95, text = cells(3)
    assert not p50.endswith(THIN) and p95.endswith(THIN)
    p50, p95, text = cells(20)
    assert THIN not in p50 + p95 and THIN_NOTE not in text
