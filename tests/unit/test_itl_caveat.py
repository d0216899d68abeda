"""Under client lag, streamed chunks merge into one read and "ITL P50 (every gap) 0.00 ms" was
printed as a fact (1.31 ms on a quiet machine). The ITL rows carry the caveat where they are
printed: the console's streaming table, compare's table, the report's ITL sections."""

from __future__ import annotations

import random
from typing import Any

from perfbench.report.compare_md import comparison
from perfbench.report.console import serving_table
from perfbench.report.release_md import _distribution
from perfbench.stats.advice import ITL_CAVEAT
from perfbench.stats.compare import Rules, compare
from perfbench.stats.gate import outcome

LAGGED = {"loop_lag": {"p99": 0.047}}  # 47 ms late at P99: over advice.LAG_WARN_S
QUIET = {"loop_lag": {"p99": 0.0008}}


def _run(rng: random.Random, itl_p50: float) -> dict[str, Any]:
    gaps = {"p50": itl_p50 * rng.gauss(1, 0.02), "p99": 0.005, "n": 4000}
    overall = {"latency": {"p50": 0.3, "p95": 0.9, "n": 100}, "itl_pooled": gaps,
               "throughput": 2.0, "error_rate": 0.0, "throttle_rate": 0.0}  # fmt: skip
    return {"overall": overall, "cases": {}, "languages": {}}


def _side(client: dict[str, Any], itl_p50: float) -> dict[str, Any]:
    rng = random.Random(itl_p50)
    return {"runs": [_run(rng, itl_p50) for _ in range(5)], "client": client}


META = {"id": "x", "suite": {"name": "s", "digest": "d"}, "status": "completed"}


def _text(base: dict[str, Any], cand: dict[str, Any]) -> str:
    result = compare(base, cand, Rules())
    return comparison(result, META, META, [], outcome(result, []))


def test_compare_marks_the_itl_rows_when_a_side_lagged() -> None:
    text = _text(_side(QUIET, 0.00131), _side(LAGGED, 0.000001))
    assert "| ITL P50 (every gap) ² |" in text and f"² {ITL_CAVEAT}" in text
    assert "| P95 latency ² |" not in text  # latency rows are not gaps
    quiet = _text(_side(QUIET, 0.00131), _side(QUIET, 0.00131))
    assert "| ITL P50 (every gap) |" in quiet and "²" not in quiet


def _summary(client: dict[str, Any]) -> dict[str, Any]:
    gaps = {"n": 4000, "p50": 0.0, "p90": 0.002, "p95": 0.003, "p99": 0.02, "p99_9": 0.03,
            "mean": 0.001}  # fmt: skip
    return {"pooled": {"overall": {"itl_pooled": gaps, "ttft": {**gaps, "p50": 0.1}}},
            "client": client}  # fmt: skip


def test_the_console_marks_its_itl_rows_when_the_client_lagged() -> None:
    lagged, quiet = serving_table(_summary(LAGGED)), serving_table(_summary(QUIET))
    assert lagged is not None and quiet is not None
    names = [row[0] for row in lagged.rows]
    assert f"ITL, every gap ({ITL_CAVEAT})" in names and "TTFT, first call" in names
    assert all(ITL_CAVEAT not in row[0] for row in quiet.rows)


def test_the_report_titles_its_itl_section_with_the_caveat() -> None:
    class View:
        def __init__(self, name: str, client: dict[str, Any]) -> None:
            self.name, self.summary = name, {**_summary(client), "runs": []}

    figures = {"itl_pooled": "itl.png"}
    lagged = _distribution(figures, [View("a1", LAGGED), View("a2", QUIET)], "itl_pooled", "ITL")  # type: ignore[list-item]
    assert any(f"ITL ({ITL_CAVEAT} in a1)" in line for line in lagged)
