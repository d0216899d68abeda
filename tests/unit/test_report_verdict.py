"""The verdict block that opens report.md: what regressed, by how much and at what p, and what
the comparison can detect, all read from the comparison (no statistics of its own), and
nothing in it that needs a file beside the report (no image, no relative link)."""

from __future__ import annotations

from typing import Any

from perfbench.report.release_md import RunView, verdict
from perfbench.stats.compare import Comparison, Rules, compare


def summary(p50s: list[float], cases: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """A summary.json with one run per value: P50 and P95 latency, throughput, error rate."""
    runs = []
    for i, p50 in enumerate(p50s):
        per_case = {
            case: {"latency": {"p50": values[i], "p95": values[i], "n": 20}}
            for case, values in (cases or {}).items()
        }
        overall = {
            "latency": {"p50": p50, "p95": 2 * p50, "mean": p50, "n": 40},
            "throughput": 1 / p50,
            "error_rate": 0.0,
        }
        runs.append({"overall": overall, "cases": per_case, "languages": {}})
    return {"runs": runs}


def view(name: str, status: str = "completed") -> RunView:
    return RunView(name, {"id": name, "label": name, "status": status}, {})


def block(base: dict[str, Any], cand: dict[str, Any], *views: RunView) -> tuple[str, Comparison]:
    result = compare(base, cand, Rules())
    return "\n".join(verdict("v1", [("v2", view("v2"), result)], views)), result


BASE = [0.50, 0.51, 0.49, 0.50, 0.52]
SLOWER = [0.65, 0.66, 0.64, 0.65, 0.67]  # +30%


def test_a_regression_says_what_moved_by_how_much_and_at_what_p() -> None:
    text, result = block(summary(BASE), summary(SLOWER))
    lines = text.splitlines()
    assert lines[0] == "## Verdict: ❌ regression — v2 against v1"
    p50 = next(r for r in result.rows if r.scope == "overall" and r.metric == "p50")
    assert p50.verdict == "regression" and p50.p is not None
    assert f"P50 latency +30.0% (p {p50.p:.3f}" in lines[2]  # the comparison's own p
    row = next(line for line in lines if line.startswith("| P50 latency |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["500.0 ms (490.0 ms–520.0 ms)", "650.0 ms (640.0 ms–670.0 ms)", "+30.0%"]
    assert cells[-1] == "❌ regression"
    assert "Detects" in lines[4] and "4 times in 5" in text


def test_a_pass_shows_its_evidence_and_says_nothing_moved() -> None:
    text, _ = block(summary(BASE), summary(list(reversed(BASE))))
    assert text.startswith("## Verdict: ✅ pass — v2 against v1")
    assert "No gated metric moved" in text
    assert "| P50 latency |" in text and "| throughput |" in text  # the headline rows


def test_the_cases_that_moved_most_are_named() -> None:
    slow_case = {"a": [0.2] * 5, "b": [0.3] * 5}
    base = summary(BASE, {"a": [0.10, 0.11, 0.09, 0.10, 0.12], "b": [0.3, 0.31, 0.29, 0.3, 0.3]})
    text, _ = block(base, summary(SLOWER, slow_case))
    assert "P95 regressed in 1 of 2 cases; most: `a` +" in text


def test_too_few_runs_carry_the_comparisons_warning_into_the_block() -> None:
    text, result = block(summary(BASE[:2]), summary(SLOWER[:2]))
    assert result.warnings and all(f"- ⚠️ {w}" in text for w in result.warnings)


def test_the_block_stands_alone_and_flags_a_run_that_did_not_complete() -> None:
    text, _ = block(summary(BASE), summary(SLOWER), view("v1"), view("v2", "killed"))
    assert "](" not in text and "<img" not in text
    assert "Did not complete: v2" in text


def test_without_a_baseline_the_block_says_nothing_was_judged() -> None:
    assert verdict(None, []) == [
        "No baseline (`--baseline RUN`): the runs are shown side by side, not judged."
    ]
