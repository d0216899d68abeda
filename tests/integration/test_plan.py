"""Sample-size planning (issue 22 item 6): the runs `perfbench plan` asks for catch the planned
change, and comparisons of the same code at that size stay quiet. Pure statistics on
constructed run summaries with a known run-to-run noise, seeded; then the command itself."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench.cli import app
from perfbench.stats import power
from perfbench.stats.compare import NOISE_K, Comparison, Rules, compare
from tests.unit.test_gate_noise import side

# Run-level noise of each figure (coefficient of variation at --repeat 1), like the demo
# suite's: P50 and TTFT noisy, the mean and throughput quiet.
NOISE = {"p50": 0.10, "p95": 0.06, "p99": 0.07, "mean": 0.03, "ttft_p50": 0.08,
         "ttft_p95": 0.15, "throughput": 0.03, "tokens_out": 0.05}  # fmt: skip
TRIALS = 100


def planned(metric: str, effect: float) -> tuple[power.Plan, float]:
    """The plan for a change of ``effect`` in ``metric`` alone, at the alpha the gate spends
    on one metric (alpha / the 8 gated figures that vary), and the CV scale it implies."""
    rules = Rules()
    gate = power.Gate(rules.alpha / len(NOISE), NOISE_K, rules.metric(metric).threshold)
    found = power.plan(effect, NOISE[metric], 1, gate)
    assert found is not None
    return found, NOISE[metric] / found.cv


def trials(metric: str, effect: float, slower: float, first_seed: int) -> list[Comparison]:
    """TRIALS seeded comparisons at the size planned for ``effect`` in ``metric``, the
    candidate's ``metric`` multiplied by ``slower``."""
    found, scale = planned(metric, effect)
    out = []
    for seed in range(first_seed, first_seed + TRIALS):
        rng = random.Random(seed)
        base = side(rng, found.runs, noise=NOISE, scale=scale)
        cand = side(rng, found.runs, {metric: slower}, NOISE, scale=scale)
        out.append(compare(base, cand, Rules()))
    return out


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
@pytest.mark.parametrize(("metric", "effect"), [("p95", 0.20), ("mean", 0.15), ("p50", 0.20)])
def test_the_planned_runs_catch_the_planned_change_90_times_in_100(
    metric: str, effect: float
) -> None:
    """A change in one metric alone, the hardest case (the others do not move to help it)."""
    rows = [
        next(r for r in c.rows if r.metric == metric) for c in trials(metric, effect, 1 + effect, 0)
    ]
    caught = sum(r.verdict == "regression" for r in rows)
    assert caught >= 90, (planned(metric, effect), caught)


@pytest.mark.slow  # make test-slow: 100 seeded comparisons
@pytest.mark.parametrize(("metric", "effect"), [("p95", 0.20), ("p50", 0.20)])
def test_the_same_code_at_the_planned_size_raises_at_most_5_false_alarms_in_100(
    metric: str, effect: float
) -> None:
    verdicts = [c.verdict for c in trials(metric, effect, 1.0, 10_000)]
    alarms = sum(v in ("regression", "inconclusive") for v in verdicts)  # fails under --strict
    assert alarms <= 5, alarms


def test_a_change_under_the_noise_bar_needs_more_tasks_a_run_not_more_runs() -> None:
    """At 6% CV a 10% change sits under 2.5 CVs: no number of runs shows it, a higher repeat
    (4× the tasks halve the CV) does."""
    gate = power.Gate(0.05 / 8, NOISE_K)
    assert power.runs_needed(0.10, 0.06, gate) is None
    found = power.plan(0.10, 0.06, 2, gate)
    assert found is not None and found.repeat > 2 and found.cv < 0.06
    assert power.plan(0.30, 0.02, 1, gate) == power.Plan(power.fewest_runs(0.05 / 8), 1, 0.02)
    # A change within the metric's threshold is never counted, whatever the runs.
    assert power.plan(0.10, 0.01, 1, power.Gate(0.05 / 8, NOISE_K, threshold=0.10)) is None
    assert power.fewest_runs(0.05) == 4 and power.fewest_runs(0.05 / 12) == 5  # 1/70, 1/252


SUITE = "cases:\n  - id: ask\n    input: What is the capital of France?\n    language: en\n"
PROFILE = """
name: jitter
ttft_ms: {lognormal: {median: 20, p99: 60}}
itl_ms: 1
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
"""


def test_the_command_plans_from_stored_runs(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    (tmp_path / "jitter.yaml").write_text(PROFILE)
    for seed in (1, 2):
        args = ["run", str(tmp_path / "suite.yaml"), "-t", f"mock:{tmp_path / 'jitter.yaml'}",
                "--runs", "3", "--repeat", "8", "--warmup", "0", "--seed", str(seed),
                "--label", f"aa{seed}", "--out", str(tmp_path / "runs"), "-q"]  # fmt: skip
        assert CliRunner().invoke(app, args).exit_code == 0
    plan = ["plan", "aa1", "aa2", "--detect", "20%", "--metric", "p50,mean"]
    result = CliRunner().invoke(app, [*plan, "--root", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("## perfbench plan: catch a 20% change")
    assert "Noise from 6 runs in 2 group(s) at --repeat 8." in text
    assert "| P50 latency |" in text and "| mean latency |" in text
    assert "Cheapest: `perfbench run SUITE --runs " in text
    # MLPerf's sample sizes for tail claims (issue 42), beside the tasks a side has.
    assert "A side of these runs has 24 tasks." in text
    assert "| P99 | 662 | 262,742 (±0.05%) | 270,336 |" in " ".join(text.split())
    bad = CliRunner().invoke(app, ["plan", "aa1", "--detect", "x", "--root", str(tmp_path)])
    assert bad.exit_code == 3 and "--detect" in bad.output
