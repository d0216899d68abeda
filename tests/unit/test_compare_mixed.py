"""A suite of very different cases (issue 22 item 7): its overall percentiles fall between the
clusters, so compare advises gating per case, and says why that is not the default."""

from __future__ import annotations

from typing import Any

from perfbench.stats.compare import Rules, compare


def _summary(medians: dict[str, float], tasks: int = 1, runs: int = 5) -> dict[str, Any]:
    def run(i: int) -> dict[str, Any]:
        cases = {
            case: {"latency": {"p50": m * (1 + 0.01 * i), "n": tasks}, "tasks": tasks}
            for case, m in medians.items()
        }
        overall = {"latency": {"p50": 0.3, "p95": 0.9, "n": tasks * len(medians)}}
        return {"overall": overall, "cases": cases}

    return {"runs": [run(i) for i in range(runs)]}


def _mixed(warnings: list[str]) -> list[str]:
    return [w for w in warnings if w.startswith("the suite mixes cases")]


def test_a_suite_of_fast_and_slow_cases_is_told_to_gate_per_case() -> None:
    summary = _summary({"quick": 0.09, "tools": 0.82})
    (warning,) = _mixed(compare(summary, summary, Rules()).warnings)
    assert "differ 9× (quick 92 ms … tools 836 ms)" in warning
    assert "--scope cases with --repeat ×20" in warning  # 1 task a case a run, 20 for a P95


def test_alike_cases_or_per_case_gating_need_no_advice() -> None:
    alike = _summary({"a": 0.2, "b": 0.7})  # 3.5×: under the 4× at which it counts as mixed
    assert not _mixed(compare(alike, alike, Rules()).warnings)
    mixed = _summary({"quick": 0.09, "tools": 0.82}, tasks=25)
    per_case = Rules(scopes=("overall", "case"))
    assert not _mixed(compare(mixed, mixed, per_case).warnings)
    (warning,) = _mixed(compare(mixed, mixed, Rules()).warnings)
    assert "--repeat" not in warning  # 25 tasks a case a run already
