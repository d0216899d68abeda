"""With `--repeat 1` a case's P50 equalled its P95 (one task a run): a percentile over fewer
tasks than 1 / (1 - q) is the slowest task, and is marked where it is printed."""

from __future__ import annotations

import re

from perfbench.report.console import case_summary, case_table, headline
from perfbench.report.format import THIN, THIN_LINE, THIN_NOTE, thin
from perfbench.report.release_md import _case_table
from perfbench.sample import Sample
from perfbench.stats.advice import advise
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


def _head(meta: dict) -> dict:  # type: ignore[type-arg]
    """``meta`` with what the headline's first line names."""
    suite = {**meta["suite"], "name": "s", "digest": "0" * 12}
    return {**meta, "suite": suite, "target": "mock", "status": "completed"}


def test_the_console_marks_a_cases_thin_percentiles() -> None:
    once = case_table(_summary(1), META)  # 3 tasks a case: P95 and P99 are the maximum
    row = once.rows[0]
    p50, p95, p99 = row[4:7]
    assert not p50.endswith(THIN) and p95.endswith(THIN) and p99.endswith(THIN)
    assert once.caption == THIN_LINE
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


def test_the_default_screen_marks_its_thin_percentiles() -> None:
    """The one-screen table printed `answer-en 3/3 169.1 286.9 286.9` unmarked: P95 = P99, the
    slowest of three tasks."""
    once = case_summary(_summary(1), META)
    p50, p95, p99 = once.rows[0][3:6]
    assert not p50.endswith(THIN) and p95.endswith(THIN) and p99.endswith(THIN)
    assert once.caption == THIN_LINE
    many = case_summary(_summary(50), META)  # 100 tasks a run, for the headline's P99 too
    assert all(THIN not in str(c) for r in many.rows for c in r) and many.caption is None


def test_the_headline_marks_a_percentile_its_runs_are_too_thin_for() -> None:
    """The README's own screen read `P95 900.5 ms … · P99 900.5 ms`: 16 tasks a run, so each
    run's P95 and P99 were its slowest task."""
    thin_runs = headline(_summary(1), _head(META)).plain  # 2 tasks a run
    marks = re.findall(r"(P\d\d) [\d.]+ ms(\*?)", thin_runs)
    assert marks == [("P50", ""), ("P95", THIN), ("P99", THIN)], thin_runs
    enough = headline(_summary(50), _head(META)).plain  # 100 tasks a run
    assert THIN not in enough and "P95 " in enough and "P99 " in enough, enough
    # the screen's one note explains a mark the headline makes, even when the table has none
    one_case = {"suite": {"cases": [{"id": "a", "language": "en", "tools": 0}]}}
    assert case_summary(_summary(8), one_case).caption == THIN_LINE  # 24 a case, 16 a run


def test_the_tail_warning_names_every_percentile_that_is_the_slowest_task() -> None:
    """With 3 tasks a case the warning named only the P99 as "simply the slowest one", while
    the P95 beside it was the same task."""

    def said(repeat: int) -> str:
        return next(n for n in advise(_summary(repeat), META) if n.startswith("Some cases"))

    assert "3 successful task(s) over all runs: their P95 and P99 are simply" in said(1)
    assert "30 successful task(s) over all runs: their P99 is simply" in said(10)
    assert not [n for n in advise(_summary(40), META) if n.startswith("Some cases")]


def _compared(tasks: int) -> str:
    """compare's Markdown for two sides of 3 runs, ``tasks`` tasks a run."""
    from perfbench.report.compare_md import comparison
    from perfbench.stats.compare import Rules, compare
    from perfbench.stats.gate import outcome

    def side(shift: float) -> dict:  # type: ignore[type-arg]
        runs = [
            {"overall": {"latency": {"p50": 0.3 + shift, "p95": 0.9 + r / 100, "p99": 0.9 + r / 100,
                                     "n": tasks},
                         "throughput": 2.0, "error_rate": 0.0}, "cases": {}, "languages": {}}
            for r in range(3)
        ]  # fmt: skip
        return {"runs": runs}

    meta = {"id": "x", "suite": {"name": "s", "digest": "d"}, "status": "completed"}
    result = compare(side(0.0), side(0.001), Rules())
    return comparison(result, meta, meta, [], outcome(result, []))


def test_compare_marks_a_percentile_its_runs_are_too_thin_for() -> None:
    """With 4 tasks a run compare printed "P95 latency 0.06 ms" and "P99 latency 0.06 ms" side
    by side, unmarked: both each run's slowest task."""
    rows = {line.split("|")[1].strip(): line for line in _compared(16).splitlines()
            if line.startswith("| P")}  # fmt: skip
    assert "| 300.0 ms |" in rows["P50 latency"] and "*" not in rows["P50 latency"]
    assert "910.0 ms* (" in rows["P95 latency"] and "910.0 ms* (" in rows["P99 latency"]
    assert THIN_NOTE in _compared(16)
    plenty = _compared(100)
    assert "ms*" not in plenty and THIN_NOTE not in plenty
