"""`perfbench history` end to end (issue 36): twelve real runs of the in-process mock, the last
six under a profile 25% slower, name the seventh as a change point in P50 (slower) and exit 4;
twelve runs of one profile have no change point and exit 0. Writes Markdown, HTML (a chart
per metric) and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench.cli import ExitCode, app
from tests.e2e.test_compare_cli import SUITE

pytest.importorskip("otava.analysis")

PROFILE = """
name: {name}
ttft_ms: {ttft}
itl_ms: {itl}
output_chars: 40
models: {{sim: {{tokens_per_char: {{default: 0.25}}, prices_as: openai/gpt-4o}}}}
"""


def make_runs(tmp: Path, profile: str, labels: list[str], ttft: float, itl: float) -> None:
    (tmp / f"{profile}.yaml").write_text(PROFILE.format(name=profile, ttft=ttft, itl=itl))
    cases = tmp / "cases"
    cases.mkdir(exist_ok=True)
    (cases / "suite.yaml").write_text(SUITE)
    for label in labels:
        args = ["run", str(cases), "-t", f"mock:{tmp / profile}.yaml", "--runs", "1",
                "--repeat", "5", "--warmup", "0", "--label", label, "--out", str(tmp / "runs"),
                "-q"]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("history")
    make_runs(tmp, "base", [f"v{i:02d}" for i in range(1, 13)], 200, 2)
    make_runs(tmp, "slower", [f"w{i:02d}" for i in range(7, 13)], 250, 2.5)  # ×1.25
    return tmp


def history(runs: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, ["history", *args, "--order", "label", "--root", str(runs / "runs")]
    )
    return result.exit_code, result.stdout


def test_a_slower_profile_from_run_7_is_named_there_and_fails(runs: Path) -> None:
    out = runs / "report"
    code, text = history(runs, "v0[1-6]", "w*", "--out", str(out))
    assert code == ExitCode.REGRESSION == 4, text
    assert text.startswith("## perfbench history: ❌ regression in the last 6 runs")
    code, raw = history(runs, "v0[1-6]", "w*", "--json")
    doc = json.loads(raw)
    assert code == 4 and doc["outcome"] == "regression"
    p50 = next(s for s in doc["series"] if s["metric"] == "p50")
    assert p50["runs"][6] == "w07"
    assert [s["run"] for s in p50["shifts"]] == ["w07"]
    assert p50["shifts"][0]["direction"] == "slower" and p50["shifts"][0]["worse"]
    assert 0.15 < p50["shifts"][0]["change"] < 0.35
    page = (out / "history.html").read_text()
    assert page.count("data:image/svg+xml;base64,") == len(doc["series"])  # a chart each
    assert (out / "history.md").read_text() == text and (out / "history-p50.svg").is_file()


def test_one_profile_throughout_has_no_change_point(runs: Path) -> None:
    code, raw = history(runs, "v*", "--json")
    doc = json.loads(raw)
    assert len(doc["series"][0]["runs"]) == 12
    assert code == ExitCode.OK and doc["outcome"] == "pass", raw
    moved = {s["metric"]: s["shifts"] for s in doc["series"] if s["shifts"]}
    assert not moved


def test_too_few_runs_or_a_name_that_matches_nothing_is_a_clear_error(runs: Path) -> None:
    result = CliRunner().invoke(app, ["history", "nothing-*", "--root", str(runs / "runs")])
    assert result.exit_code == ExitCode.CONFIG
    assert "no run under" in result.stderr and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["history", "v01", "v02", "--root", str(runs / "runs")])
    assert result.exit_code == ExitCode.CONFIG and "3 or more" in result.stderr
