"""The default screen's per-case table of a run of many cases (issue 38): the slowest
``SCREEN_CASES`` by P95 in the suite's order, each case's figures read one at a time (a run's
are made when read: 10^5 cases' held together were gigabytes)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Console

from perfbench.report import console as tables

N = 40


class _Made(dict[str, Any]):
    """A dict that can be watched (weakref) until it is freed."""


class Figures(Mapping[str, Any]):
    """Each case's figures made when read, as stats/summary.CaseFigures does, counting the
    reads and the most alive at once."""

    def __init__(self, p95: dict[str, float]) -> None:
        self.p95 = p95
        self.reads = self.alive = self.most = 0

    def __getitem__(self, case: str) -> dict[str, Any]:
        self.reads += 1
        self.alive += 1
        self.most = max(self.most, self.alive)
        p95 = self.p95[case]
        made = _Made({"tasks": 1, "ok": 1, "tokens_out": 3, "latency": {"p50": p95, "p95": p95,
                "p99": p95, "n": 1}, "ttft": None})  # fmt: skip
        weakref.finalize(made, self._freed)
        return made

    def _freed(self) -> None:
        self.alive -= 1

    def __contains__(self, case: object) -> bool:  # as CaseFigures: without making them
        return case in self.p95

    def __iter__(self) -> Iterator[str]:
        return iter(self.p95)

    def __len__(self) -> int:
        return len(self.p95)


def _screen(p95: dict[str, float]) -> tuple[str, Figures]:
    cases = Figures(p95)
    overall = {"tasks": N, "ok": N, "latency": {"p50": 0.1, "p95": 0.1, "n": N}}
    summary = {"pooled": {"cases": cases, "overall": overall}, "runs": [{}]}
    meta = {"suite": {"cases": [{"id": c, "language": "en"} for c in p95]}}
    out = Console(width=200, record=True, color_system=None)
    out.print(tables.case_summary(summary, meta))
    return out.export_text(), cases


def test_the_slowest_cases_by_p95_in_suite_order() -> None:
    # Case k's P95 rises with k, except the ties at the top: c00 and c01 as slow as c39.
    p95 = {f"c{k:02d}": k / 1000 for k in range(N)}
    p95["c00"] = p95["c01"] = p95["c39"]
    text, cases = _screen(p95)
    rows = [
        line.split()[0]
        for line in text.splitlines()
        if line.strip()[:2] in ("c0", "c1", "c2", "c3")
    ]
    slowest = ["c00", "c01", *(f"c{k}" for k in range(26, 40))]
    assert rows == slowest, text
    assert f"the {tables.SCREEN_CASES} slowest of {N} cases by P95" in text
    assert cases.reads == N + tables.SCREEN_CASES  # one read to rank, one to print
    assert cases.most == 1  # all N were held at once before


def test_few_cases_are_all_shown() -> None:
    text, _ = _screen({"a": 0.2, "b": 0.1})
    assert "slowest of" not in text and "a " in text and "b " in text
