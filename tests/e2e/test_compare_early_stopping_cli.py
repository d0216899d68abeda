"""Issue 42's done-when "a run of 100 tasks shows the early-stopping P99 beside the raw P99",
end to end: real runs of the in-process mock, then `perfbench show --details` and `perfbench
compare` (Markdown and --json) against a side large enough for an estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench.cli import app
from tests.e2e.test_compare_cli import SUITE  # one case: "What is the capital of France?"

PROFILE = """
name: es
ttft_ms: 5
itl_ms: 1
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}, prices_as: openai/gpt-4o}}
"""


def _run(tmp: Path, label: str, runs: int, repeat: int) -> None:
    args = ["run", str(tmp / "cases"), "-t", f"mock:{tmp / 'es.yaml'}", "--runs", str(runs),
            "--repeat", str(repeat), "--concurrency", "16", "--warmup", "0", "--label", label,
            "--out", str(tmp / "runs"), "-q"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("early-stopping")
    (tmp / "es.yaml").write_text(PROFILE)
    (tmp / "cases").mkdir()
    (tmp / "cases" / "suite.yaml").write_text(SUITE)
    _run(tmp, "small", runs=1, repeat=100)  # 100 tasks: no P99 estimate (needs 662)
    _run(tmp, "large", runs=2, repeat=400)  # 800 tasks pooled: an estimate
    return tmp / "runs"


def _invoke(root: Path, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--root", str(root)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_100_task_run_says_its_raw_p99_and_what_an_estimate_needs(root: Path) -> None:
    text = " ".join(_invoke(root, "show", "small", "--details").split())  # unwrapped
    line = text[text.index("early-stopping P99") :]
    assert line.startswith("early-stopping P99 (99% confidence, runs pooled): latency none: ")
    assert "latency none: needs 662 tasks, has 100 (raw " in line
    assert "they back only P93.5 ≤ " in line and ", the largest)" in line


def test_compare_puts_both_sides_claims_beside_the_tail_rows(root: Path) -> None:
    text = _invoke(root, "compare", "small", "large")
    head = "| Early-stopping (99%) | Baseline | Candidate |"
    table = text[text.index(head) :]
    row = next(line for line in table.splitlines() if line.startswith("| P99 latency |"))
    base, cand = (cell.strip() for cell in row.split("|")[2:4])
    assert base.startswith("none: needs 662 tasks, has 100 (raw ")
    assert cand.endswith(")") and " (raw " in cand and not cand.startswith("none")
    assert "Early-stopping (MLPerf Inference's rule): with 99% confidence" in table

    doc = json.loads(_invoke(root, "compare", "small", "large", "--json"))
    p99 = next(t for t in doc["comparison"]["tails"] if t["metric"] == "p99")
    assert p99["baseline"]["value"] is None and p99["baseline"]["backs"] == 93.5
    assert p99["baseline"]["largest"] >= p99["baseline"]["raw"]
    large = p99["candidate"]
    assert large["n"] == 800 and large["value"] >= large["raw"]  # the estimate is the larger
