"""The library's face for stored runs: ``api.compare``, ``api.plan`` and ``api.report`` give
what `perfbench compare`, `plan` and `report` print and write, as typed values a script uses
without the CLI (the commands are thin callers of these)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench import api
from perfbench.cli import app
from perfbench.errors import GateError
from perfbench.stats.compare import Rules
from tests.e2e.test_compare_cli import make_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("face")
    make_run(tmp, "fast", 20, "v1")
    make_run(tmp, "slow", 60, "v2")  # TTFT ×3: every latency metric moves
    return tmp / "runs"


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout


def test_compare_returns_the_verdict_the_command_prints(runs: Path) -> None:
    verdict = api.compare("v1", "v2", root=runs)
    assert verdict.outcome == "regression" and verdict.failed
    assert verdict.comparison is not None and verdict.comparison.regressions
    assert verdict.baseline["label"] == "v1" and verdict.candidate["label"] == "v2"
    code, text = _cli("compare", "v1", "v2", "--root", str(runs))
    assert code == 4 and text == verdict.markdown()
    assert not api.compare("v2", "v1", root=runs).failed  # an improvement


def test_compare_takes_rules_and_thresholds_as_values(runs: Path) -> None:
    lenient = Rules()
    for name in lenient.gate:  # a 1000% tolerance on every gated metric: ×3 is within it
        lenient = lenient.with_tolerance(name, 10.0)
    assert api.compare("v1", "v2", rules=lenient, root=runs).outcome != "regression"
    alone = api.compare("v2", thresholds=["p50<1ms"], root=runs)
    assert alone.comparison is None and alone.outcome == "threshold" and alone.failed
    assert [t.ok for t in alone.thresholds] == [False]
    with pytest.raises(GateError, match="give a baseline and a candidate"):
        api.compare("v1", root=runs)


def test_plan_returns_the_needs_the_command_prints(runs: Path) -> None:
    needs = api.plan(["v1", "v2"], 0.2, root=runs)
    assert needs.effect == 0.2 and needs.repeat == 4 and needs.needs
    best = needs.cheapest()
    assert best is not None and best.plan is not None and best.plan.runs >= 2
    code, text = _cli("plan", "v1", "v2", "--detect", "20%", "--root", str(runs))
    assert code == 0 and text == needs.markdown()
    assert f"--runs {best.plan.runs} --repeat {best.plan.repeat}" in text


def test_report_writes_the_report_folder(runs: Path, tmp_path: Path) -> None:
    path = api.report(["v2"], baseline="v1", out=tmp_path / "r", root=runs)
    assert path == tmp_path / "r" / "report.md"
    text = path.read_text(encoding="utf-8")
    assert "regression" in text and (tmp_path / "r" / "report.html").is_file()
    with pytest.raises(GateError, match="at least one run besides the baseline"):
        api.report(["v1"], baseline="v1", root=runs)
