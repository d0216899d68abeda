"""Which cases a report lists (issue 38): every one up to ``REPORT_CASES``; past that, the
slowest by P95, so that a run of 10^5 prompts gives a table and a chart one can read (and
matplotlib can draw), and says how many it left out. Pure."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REPORT_CASES = 30


def listed(across: Sequence[Mapping[str, Any]], limit: int = REPORT_CASES) -> list[str]:
    """The cases of these runs' ``across_runs`` to list, sorted by name: all of them, or the
    ``limit`` with the highest median P95 in any run (ties: the first by name). Each case's
    figures are read one at a time."""
    cases = sorted({case for a in across for case in a["cases"]})
    if len(cases) <= limit:
        return cases

    def rank(case: str) -> tuple[float, str]:
        return -max(_p95(a["cases"], case) for a in across), case

    return sorted(heapq.nsmallest(limit, cases, rank))


def _p95(cases: Mapping[str, Any], case: str) -> float:
    entry = cases[case].get("latency.p95") if case in cases else None
    return float(entry["median"]) if entry else 0.0


def left_out(across: Sequence[Mapping[str, Any]], shown: Iterable[str]) -> str | None:
    """The Markdown line under a table of ``shown`` cases when it left some out (else None)."""
    total = len({case for a in across for case in a["cases"]})
    more = total - len(set(shown))
    if more <= 0:
        return None
    return (
        f"… and {more} more cases: the {total - more} slowest by P95 are listed "
        "(`perfbench show RUN_DIR --details` lists every case)."
    )
