"""`perfbench compare` end to end: real runs of the in-process mock under two profiles that
differ by a known latency factor, then the verdict, the exit code and the Markdown table."""

from __future__ import annotations

import json
import shutil
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


def make_run(
    tmp: Path, name: str, ttft: int, label: str, suite: str = SUITE, runs: int = 5, *more: str
) -> None:
    (tmp / f"{name}.yaml").write_text(PROFILE.format(name=name, ttft=ttft))
    cases = tmp / f"cases-{label}"
    cases.mkdir(exist_ok=True)
    (cases / "suite.yaml").write_text(suite)
    target = f"mock:{tmp / name}.yaml"
    args = ["run", str(cases), "-t", target, "--runs", str(runs), "--repeat", "4", *more]
    result = CliRunner().invoke(app, [*args, "--label", label, "--out", str(tmp / "runs"), "-q"])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("compare")
    # TTFT ×3: every latency metric moves by ≥ 100 ms. At 20 and 60 ms, a loaded machine's
    # scheduling delay (tens of ms, on both sides) shrank the ratio and mixed the runs' order.
    make_run(tmp, "fast", 50, "v1")
    make_run(tmp, "slow", 150, "v2")
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
    # 5 vs 5 runs, all slower: 1/252; BH corrects it over the gated metrics (issue 22)
    assert "| 0.004 (q 0.0" in lines["P50 latency"]
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


def test_a_big_change_over_too_few_runs_is_headed_inconclusive_and_strict_fails_it(
    tmp_path: Path,
) -> None:
    """Two runs a side cannot make a change significant (p ≥ 1/6): the rows say inconclusive,
    and so must the heading, even where the exit is 0 (without --strict)."""
    make_run(tmp_path, "fast", 20, "a", runs=2)
    make_run(tmp_path, "slow", 60, "b", runs=2)
    code, text = compare(tmp_path, "a", "b")
    assert code == ExitCode.OK
    assert text.startswith("## perfbench compare: ⚠️ inconclusive (a change needs more runs")
    assert "exit 0 without --strict" in text.splitlines()[0]
    assert compare(tmp_path, "a", "b", "--strict")[0] == ExitCode.INCONCLUSIVE == 6


def test_a_run_that_did_not_complete_is_no_plain_pass(runs: Path, tmp_path: Path) -> None:
    """A candidate cut short measured only part of what was planned: compared with itself
    complete it changes nothing, yet the verdict must not read as a clean pass."""
    root = runs / "runs"
    source = next(
        d for d in root.iterdir() if json.loads((d / "meta.json").read_text())["label"] == "v2"
    )
    cut = tmp_path / "cut"
    shutil.copytree(source, cut)
    meta = json.loads((cut / "meta.json").read_text())
    (cut / "meta.json").write_text(json.dumps({**meta, "status": "interrupted", "label": "cut"}))
    code, text = compare(runs, "v2", str(cut))
    assert code == ExitCode.OK
    assert text.startswith("## perfbench compare: ⚠️ inconclusive (a run did not complete)")
    assert "did not complete (interrupted)" in text
    assert compare(runs, "v2", str(cut), "--strict")[0] == ExitCode.INCONCLUSIVE


def test_what_differs_between_the_runs_is_said(tmp_path: Path) -> None:
    make_run(tmp_path, "fast", 20, "dup", SUITE, 1)
    make_run(tmp_path, "fast", 20, "dup", SUITE, 1, "-c", "2")  # the same label again
    make_run(tmp_path, "slow", 60, "other", SUITE, 1)
    _, text = compare(tmp_path, "dup", "dup")
    assert "- baseline and candidate are the same run" in text
    assert "- label 'dup' names 2 runs; the newest," in text
    oldest = sorted((tmp_path / "runs").iterdir())[0]
    _, text = compare(tmp_path, str(oldest), "other")
    assert "- the runs measured different targets (mock:" in text
    assert "the runs had different loads" not in text  # both -c 1
    _, text = compare(tmp_path, str(oldest), "dup")
    assert "- the runs had different loads (fixed: concurrency 1" in text
    assert "vs fixed: concurrency 2" in text


def test_a_threshold_breach_has_its_own_exit_code(runs: Path) -> None:
    code, text = compare(
        runs, "v2", "--threshold", "ttft_p50<100ms", "--threshold", "error_rate<1%"
    )
    assert code == ExitCode.THRESHOLD == 5
    assert "| `ttft_p50<100ms` |" in text and "❌ breached" in text
    assert compare(runs, "v1", "--threshold", "ttft_p50<100ms")[0] == ExitCode.OK
    assert compare(runs, "v1", "--threshold", "ttft_p50{case=ask}<100ms")[0] == ExitCode.OK
    # A case the run does not have is a typo to fix, not a breach to report.
    typo = CliRunner().invoke(
        app,
        ["compare", "v1", "--threshold", "ttft_p50{case=asc}<40ms", "--root", str(runs / "runs")],
    )
    assert typo.exit_code == ExitCode.CONFIG
    assert "the run has no case 'asc'; it has 'ask'" in typo.output


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


def test_settings_of_the_wrong_type_are_errors_and_a_lone_string_is_a_list(
    runs: Path, tmp_path: Path
) -> None:
    settings = tmp_path / "perfbench.toml"
    settings.write_text('[compare]\nstrict = "no"\n')  # a string, which Python finds true
    result = CliRunner().invoke(
        app, ["compare", "v1", "v2", "--config", str(settings), "--root", str(runs / "runs")]
    )
    assert result.exit_code == ExitCode.CONFIG
    assert "strict should be true or false (no quotes); it is 'no'" in result.output
    settings.write_text('[compare]\ngate = "error_rate"\n')  # read letter by letter before
    code, text = compare(runs, "v1", "v2", "--config", str(settings))
    assert code == ExitCode.OK and "Gated: error_rate (" in text


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
        for side, ttft in (("base", 50), ("cand", 150)):
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
