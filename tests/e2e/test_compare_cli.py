"""`perfbench compare` end to end: real runs of the in-process mock under two profiles that
differ by a known latency factor, then the verdict, the exit code and the Markdown table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench.cli import ExitCode, app

SUITE = """
cases:
  - id: ask
    input: What is the capital of France?
    language: en
"""
PROFILE = """
name: {name}
ttft_ms: {ttft}
itl_ms: 1
output_chars: 40
models: {{sim: {{tokens_per_char: {{default: 0.25}}, prices_as: openai/gpt-4o}}}}
"""


def make_run(tmp: Path, name: str, ttft: int, label: str, suite: str = SUITE) -> None:
    (tmp / f"{name}.yaml").write_text(PROFILE.format(name=name, ttft=ttft))
    cases = tmp / f"cases-{label}"
    cases.mkdir()
    (cases / "suite.yaml").write_text(suite)
    args = ["run", str(cases), "-t", f"mock:{tmp / name}.yaml", "--runs", "5", "--repeat", "4"]
    result = CliRunner().invoke(app, [*args, "--label", label, "--out", str(tmp / "runs"), "-q"])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("compare")
    make_run(tmp, "fast", 20, "v1")
    make_run(tmp, "slow", 60, "v2")  # TTFT ×3: every latency metric moves by ≥ 40 ms
    return tmp


def compare(runs: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args, "--root", str(runs / "runs")])
    return result.exit_code, result.stdout


def test_a_slower_candidate_is_a_regression_with_its_exit_code(runs: Path) -> None:
    code, text = compare(runs, "v1", "v2")
    assert code == ExitCode.REGRESSION == 4
    assert text.startswith("## perfbench compare: ❌ regression")
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    assert "❌ regression" in lines["P50 latency"] and "❌ regression" in lines["TTFT P50"]
    assert "| 0.004 |" in lines["P50 latency"]  # 5 vs 5 runs, all slower: 1/252
    assert "exact" in lines["tokens out / task"] and "pass" in lines["tokens out / task"]


def test_the_reverse_is_an_improvement_and_passes(runs: Path) -> None:
    code, text = compare(runs, "v2", "v1")
    assert code == ExitCode.OK
    assert "✅ improvement" in text


def test_json_verdict_for_scripts(runs: Path) -> None:
    code, text = compare(runs, "v1", "v2", "--json", "--gate", "ttft_p50")
    doc = json.loads(text)
    assert code == 4 and doc["outcome"] == "regression" and doc["exit_code"] == 4
    gated = [r for r in doc["comparison"]["rows"] if r["gated"]]
    assert {r["metric"] for r in gated} == {"ttft_p50"}
    row = gated[0]
    assert row["verdict"] == "regression"
    assert row["candidate"]["median"] == pytest.approx(3 * row["baseline"]["median"], rel=0.3)


def test_a_threshold_breach_has_its_own_exit_code(runs: Path) -> None:
    code, text = compare(runs, "v2", "--threshold", "ttft_p50<40ms", "--threshold", "error_rate<1%")
    assert code == ExitCode.THRESHOLD == 5
    assert "| `ttft_p50<40ms` |" in text and "❌ breached" in text
    assert compare(runs, "v1", "--threshold", "ttft_p50<40ms")[0] == ExitCode.OK


def test_ci_outputs_step_summary_markdown_and_junit(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, text = compare(
        runs, "v1", "v2", "--junit", str(tmp_path / "j.xml"), "--markdown", str(tmp_path / "c.md")
    )
    assert code == 4
    assert summary.read_text() == "earlier step\n" + text  # appended, not replaced
    assert (tmp_path / "c.md").read_text() == text
    junit = (tmp_path / "j.xml").read_text()
    assert 'failures="' in junit and "<failure" in junit and "P50 latency" in junit


def test_settings_file_rules_and_strictness(runs: Path, tmp_path: Path) -> None:
    settings = tmp_path / "perfbench.toml"
    settings.write_text('[compare]\ngate = ["error_rate"]\nthresholds = ["ttft_p50<1s"]\n')
    code, text = compare(runs, "v1", "v2", "--config", str(settings))
    assert code == ExitCode.OK  # only the error rate is gated, and it did not move
    assert "Gated: error_rate" in text
    settings.write_text('[compare]\ngate = ["nope"]\n')
    code, _ = compare(runs, "v1", "v2", "--config", str(settings))
    assert code == ExitCode.CONFIG


def test_different_suites_are_refused_unless_forced(runs: Path, tmp_path: Path) -> None:
    other = SUITE.replace("France", "Spain")
    make_run(tmp_path, "fast", 20, "other", suite=other)
    root = ["--root", str(tmp_path / "runs")]
    v1 = str(next((runs / "runs").glob("*_v1")))
    result = CliRunner().invoke(app, ["compare", v1, "other", *root])
    assert result.exit_code == ExitCode.CONFIG
    assert "different suites" in result.output and "--force" in result.output
    forced = CliRunner().invoke(app, ["compare", v1, "other", "--force", *root])
    assert forced.exit_code in (0, 4) and "different suites" in forced.stdout


def test_a_side_can_pool_run_directories_by_pattern(runs: Path, tmp_path: Path) -> None:
    """Interleaved CI: one run per directory, baseline and candidate alternating."""
    for i in range(3):
        for side, ttft in (("base", 20), ("cand", 60)):
            sub = tmp_path / f"{side}{i}"
            sub.mkdir()
            (sub / "suite.yaml").write_text(SUITE)
            (tmp_path / f"{side}.yaml").write_text(PROFILE.format(name=side, ttft=ttft))
            args = ["run", str(sub), "-t", f"mock:{tmp_path / side}.yaml", "--runs", "1"]
            args += ["--label", f"{side}-{i}", "--out", str(tmp_path / "runs"), "-q"]
            assert CliRunner().invoke(app, args).exit_code == 0
    result = CliRunner().invoke(
        app, ["compare", "base-*", "cand-*", "--json", "--root", str(tmp_path / "runs")]
    )
    doc = json.loads(result.stdout)
    assert doc["comparison"]["runs"] == [3, 3]
    assert doc["candidate"] == "cand-* (3 run directories)"
    ttft = next(r for r in doc["comparison"]["rows"] if r["metric"] == "ttft_p50")
    assert ttft["p"] == pytest.approx(1 / 20)  # 3 vs 3, all slower: the smallest p possible
    missing = CliRunner().invoke(
        app, ["compare", "nope-*", "cand-*", "--root", str(tmp_path / "runs")]
    )
    assert missing.exit_code == ExitCode.CONFIG and "matching 'nope-*'" in missing.output


def test_unwritable_outputs_are_clear_errors(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a directory: cannot append
    result = CliRunner().invoke(app, ["compare", "v1", "v2", "--root", str(runs / "runs")])
    assert result.exit_code == ExitCode.CONFIG
    assert f"{tmp_path}: cannot write" in result.output
