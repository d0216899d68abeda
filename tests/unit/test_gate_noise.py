"""The release gate at real noise (issue 22 items 4, 5, 7): a correction over the gated metrics,
a bar that rises with the runs' own run-to-run noise, tokens and cost that may vary, what the
runs can detect, thin percentiles, and one verdict for people and scripts."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from perfbench.cli import ExitCode, app
from perfbench.report.compare_md import comparison
from perfbench.stats.compare import Rules, benjamini_hochberg, compare, holm
from perfbench.stats.gate import build_rules, fails, outcome
from tests.e2e.test_compare_cli import make_run

# Run-to-run noise (CV) measured on the demo suite by the newcomer review (10 A/A sides).
NOISE = {"p50": 0.105, "p95": 0.041, "p99": 0.061, "mean": 0.021, "ttft_p50": 0.081,
         "ttft_p95": 0.165, "throughput": 0.03, "tokens_out": 0.05}  # fmt: skip
BASE = {"p50": 0.30, "p95": 0.90, "p99": 1.0, "mean": 0.45, "ttft_p50": 0.06,
        "ttft_p95": 0.15, "throughput": 2.2, "tokens_out": 44.0}  # fmt: skip


def run(
    rng: random.Random,
    noise: dict[str, float],
    slower: dict[str, float],
    tasks: int = 400,
    scale: float = 1.0,
) -> dict[str, Any]:
    """One run's overall figures, each around its base with its own noise (divided by
    ``scale``: more tasks a run), the ``slower`` ones multiplied."""
    v = {k: BASE[k] * slower.get(k, 1.0) * rng.gauss(1, noise[k] / scale) for k in BASE}
    latency = {"p50": v["p50"], "p95": v["p95"], "p99": v["p99"], "mean": v["mean"], "n": tasks}
    overall = {
        "latency": latency,
        "ttft": {"p50": v["ttft_p50"], "p95": v["ttft_p95"], "n": tasks},
        "throughput": v["throughput"], "error_rate": 0.0, "throttle_rate": 0.0,
        "tokens_in": 170.0, "tokens_out": v["tokens_out"], "cost_per_task": v["tokens_out"] / 5e4,
    }  # fmt: skip
    return {"overall": overall, "cases": {}, "languages": {}}


def side(
    rng: random.Random,
    runs: int = 5,
    slower: dict[str, float] | None = None,
    noise: dict[str, float] = NOISE,
    **more: Any,
) -> dict[str, Any]:
    return {"runs": [run(rng, noise, slower or {}, **more) for _ in range(runs)]}


def test_holm_and_benjamini_hochberg_adjust_as_their_definitions() -> None:
    ps = [0.01, 0.04, 0.03, 0.005]
    assert holm(ps) == pytest.approx([0.03, 0.06, 0.06, 0.02])  # (m − rank + 1)·p, monotone
    assert benjamini_hochberg(ps) == pytest.approx([0.02, 0.04, 0.04, 0.02])  # p·m/rank
    assert holm([]) == [] and benjamini_hochberg([0.2]) == [0.2]


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
def test_a_a_at_the_demo_suites_noise_fails_at_most_5_of_100_even_strict() -> None:
    """Twelve gated metrics at 5–17% run-to-run noise: with no correction and fixed
    thresholds, about half of such pairs were flagged (3 of 6 in the review)."""
    failures = {"regression": 0, "inconclusive": 0}
    for seed in range(100):
        rng = random.Random(seed)
        verdict = compare(side(rng), side(rng), Rules()).verdict
        if verdict in failures:
            failures[verdict] += 1
    assert sum(failures.values()) <= 5, failures
    loose = build_rules({"correction": "none"}, noise_k=0)  # the gate before issue 22
    before = sum(
        compare(side(random.Random(s)), side(random.Random(s + 500)), loose).verdict
        in ("regression", "inconclusive")
        for s in range(40)
    )
    assert before >= 10  # the fixture is as noisy as the issue says


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
def test_a_20_percent_slowdown_at_that_noise_is_caught_95_times_in_100() -> None:
    slower = {k: 1.2 for k in ("p50", "p95", "p99", "mean", "ttft_p50", "ttft_p95")}
    slower["throughput"] = 1 / 1.2
    caught = sum(
        compare(side(random.Random(seed)), side(random.Random(seed + 1), slower=slower), Rules())
        .verdict == "regression"
        for seed in range(0, 200, 2)
    )  # fmt: skip
    assert caught >= 95


def row_of(result: Any, metric: str) -> Any:
    return next(r for r in result.rows if r.scope == "overall" and r.metric == metric)


def test_the_bar_rises_with_the_runs_noise_and_says_so() -> None:
    rng = random.Random(3)
    base, cand = side(rng), side(rng, slower={"p50": 1.15})  # P50 noise 10.5%: 15% is noise
    result = compare(base, cand, Rules())
    p50 = row_of(result, "p50")
    assert p50.by_noise and p50.bar == pytest.approx(2.5 * p50.noise)
    assert p50.verdict == "pass"
    assert not row_of(result, "mean").by_noise  # 2% noise: its 10% threshold stands
    fixed = compare(base, cand, build_rules({}, noise_k=0))
    assert row_of(fixed, "p50").bar == 0.10


def test_varying_tokens_and_cost_are_tested_not_compared_exactly() -> None:
    """Output length varies with any sampling model: +3% tokens at 5% noise is a pass, where
    the 0% threshold called it inconclusive."""
    rng = random.Random(4)
    result = compare(side(rng), side(rng, slower={"tokens_out": 1.03}), Rules())
    tokens = row_of(result, "tokens_out")
    assert not tokens.exact and tokens.verdict == "pass"
    assert row_of(result, "tokens_in").exact  # the same in every run: still compared exactly


def test_the_correction_is_named_and_what_the_runs_detect_is_said() -> None:
    rng = random.Random(5)
    result = compare(side(rng), side(rng), Rules())
    assert result.correction == "benjamini-hochberg"
    assert all(r.q is not None for r in result.rows if r.gated and not r.exact and r.p != 1.0)
    p95 = row_of(result, "p95")
    assert p95.detectable is not None and p95.detectable >= 0.15  # never below the threshold
    meta = {"id": "x", "suite": {"name": "s", "digest": "d"}, "status": "completed"}
    text = comparison(result, meta, meta, [], outcome(result, []))
    assert "Benjamini-Hochberg's correction over the" in text
    assert "With 5 runs a side at this noise, the smallest changes this comparison detects" in text
    assert f"P95 latency ±{100 * p95.detectable:.0f}%" in text
    holm_rules = build_rules({"correction": "holm"})
    assert "Holm's correction" in comparison(
        compare(side(rng), side(rng), holm_rules), meta, meta, [], "pass"
    )


def test_a_percentile_over_too_few_tasks_a_run_is_warned_with_the_fix() -> None:
    rng = random.Random(6)
    thin = compare(side(rng, tasks=16), side(rng, tasks=16), Rules())
    warned = {w.split(" ")[0]: w for w in thin.warnings if "tasks a run" in w}
    assert set(warned) == {"p95", "p99", "ttft_p95"}
    assert "p95 rests on 16 tasks a run: below 20" in warned["p95"]
    assert "multiply --repeat by 2" in warned["p95"] and "by 7" in warned["p99"]
    enough = compare(side(rng, tasks=40), side(rng, tasks=40), Rules())
    assert [w.split(" ")[0] for w in enough.warnings if "tasks a run" in w] == ["p99"]
    ungated = compare(side(rng, tasks=16), side(rng, tasks=16), build_rules({}, gate=["mean"]))
    assert not [w for w in ungated.warnings if "tasks a run" in w]


def test_the_outcome_is_the_verdict_and_only_the_exit_code_depends_on_strict() -> None:
    rng = random.Random(7)
    few = compare(side(rng, 2), side(rng, 2, slower={"mean": 1.5}), Rules())
    assert outcome(few, []) == "inconclusive"  # 2 vs 2 runs: p ≥ 1/6
    assert not fails("inconclusive", strict=False) and fails("inconclusive", strict=True)
    assert fails("regression", strict=False) and not fails("pass", strict=True)
    assert outcome(None, [], complete=False) == "inconclusive"


def test_compare_json_says_inconclusive_and_exits_by_the_documented_mapping(
    tmp_path: Path,
) -> None:
    make_run(tmp_path, "fast", 20, "a", runs=2)
    make_run(tmp_path, "slow", 60, "b", runs=2)
    root = ["--root", str(tmp_path / "runs")]
    for flags, code in (((), ExitCode.OK), (("--strict",), ExitCode.INCONCLUSIVE)):
        result = CliRunner().invoke(app, ["compare", "a", "b", "--json", *flags, *root])
        doc = json.loads(result.stdout)
        assert doc["outcome"] == "inconclusive"  # was "pass" without --strict
        assert result.exit_code == doc["exit_code"] == code
    heading = CliRunner().invoke(app, ["compare", "a", "b", "--strict", *root]).stdout
    assert heading.startswith("## perfbench compare: ⚠️ inconclusive (a change needs more runs")
    assert "exit 6 (--strict)" in heading.splitlines()[0]
