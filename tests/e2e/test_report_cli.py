"""`perfbench report` end to end: two real runs, a Markdown report readable on GitHub, charts
that are valid images with one series per run, and the same bytes for the same runs."""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree as ET

import matplotlib.image
import pytest
from typer.testing import CliRunner

from perfbench.cli import ExitCode, app
from tests.e2e.test_compare_cli import make_run
from tests.helpers import CASES


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    make_run(tmp, "fast", 20, "v1")
    make_run(tmp, "slow", 60, "v2")
    return tmp


def report(runs: Path, out: Path, *args: str) -> str:
    root = ["--root", str(runs / "runs"), "--out", str(out)]
    result = CliRunner().invoke(app, ["report", *args, *root])
    assert result.exit_code == 0, result.output
    return (out / "report.md").read_text()


@pytest.fixture(scope="module")
def rendered(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of v1 and v2, rendered once for the tests that only read it (a render
    draws its charts: seconds on a busy machine)."""
    out = tmp_path_factory.mktemp("rendered")
    report(runs, out, "v1", "v2", "--baseline", "v1")
    return out


def test_report_of_two_runs_renders_markdown_and_charts(rendered: Path) -> None:
    text = (rendered / "report.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links and all(not Path(link).is_absolute() for link in links)  # relative links
    for link in links:
        assert (rendered / link).is_file(), link
    for chart in ("latency", "cases", "throughput", "cost"):
        png = rendered / f"{chart}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, _ = matplotlib.image.imread(png).shape
        assert height > 200 and width > 300
        svg = ET.parse(rendered / f"{chart}.svg").getroot()
        texts = "".join(svg.itertext())
        assert "v1" in texts and "v2" in texts, chart  # both runs in every chart's legend
    latency = (rendered / "latency.svg").read_text()
    assert 'id="line-r0"' in latency and 'id="line-r1"' in latency
    # Tables: GitHub needs a delimiter row right after each header row.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ") and (i == 0 or not lines[i - 1].startswith("|")):
            assert re.fullmatch(r"\|( ---:? \|)+", lines[i + 1]), line
    assert "## Relative mean latency (1.00 = the baseline" in text
    assert "## v2 vs v1: ❌ regression" in text
    assert "| **v1** (baseline) |" in text


def test_report_bytes_are_deterministic(runs: Path, rendered: Path, tmp_path: Path) -> None:
    report(runs, tmp_path, "v1", "v2", "--baseline", "v1")
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(f.name for f in rendered.iterdir())
    for file in sorted(rendered.iterdir()):
        assert file.read_bytes() == (tmp_path / file.name).read_bytes(), file.name


def test_report_of_a_missing_run_is_a_clear_error(runs: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", "nope", "--root", str(runs / "runs")])
    assert result.exit_code == ExitCode.CONFIG and "no run 'nope'" in result.output


def test_report_reads_a_run_killed_before_its_summary(runs: Path, tmp_path: Path) -> None:
    """A `kill -9` leaves no summary.json: the report summarises what samples.jsonl holds."""
    import shutil

    killed = tmp_path / "runs" / "killed"
    shutil.copytree(next((runs / "runs").glob("*_v2")), killed)
    (killed / "summary.json").unlink()
    with (killed / "samples.jsonl").open("a") as f:
        f.write('{"phase": "meas')  # the torn last line of a killed writer
    text = report(runs, tmp_path / "r", str(killed))
    assert "| 20/20 |" in text  # 5 runs × 4 measured tasks; warmup and torn line left out


def test_a_sweep_folder_reports_its_levels_in_order_with_the_sweep_once(tmp_path: Path) -> None:
    args = ["sweep", str(CASES / "answer.yaml"), "-t", "mock:zero", "-c", "2,1", "--runs", "1"]
    sweep = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "sweeps")])
    assert sweep.exit_code == 0, sweep.output
    [folder] = list((tmp_path / "sweeps").iterdir())
    text = report(tmp_path, tmp_path / "r", str(folder))
    assert text.splitlines().count("## Sweep") == 1
    assert text.index("level-1") < text.index("level-2")  # level order, not the order run
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "sweep-plan.json").write_text("{}")
    result = CliRunner().invoke(app, ["report", str(empty)])
    assert result.exit_code == ExitCode.CONFIG and "no level run yet" in result.output


def test_list_takes_the_folder_as_an_argument_or_as_root(runs: Path) -> None:
    by_argument = CliRunner().invoke(app, ["list", str(runs / "runs")])
    by_option = CliRunner().invoke(app, ["list", "--root", str(runs / "runs")])
    assert by_argument.exit_code == by_option.exit_code == 0
    assert "v1" in by_option.output and by_option.output == by_argument.output
