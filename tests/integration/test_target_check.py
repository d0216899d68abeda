"""A suite a target cannot run is refused before anything runs (Target.check): a case with
tools against the legacy completions API, which has no tool calling, used to fail each of its
tasks as `unhandled:TargetError`, a kind that means a bug in the target."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfbench import api
from perfbench.errors import TargetError
from perfbench.spec import Plan, RunSpec, TargetSpec

CASES = Path(__file__).resolve().parents[2] / "cases"
TOOL = "cases:\n  - {id: t, language: en, input: hi, tools: [{name: get, result: ok}]}\n"


@pytest.mark.parametrize("target", ["mock+http", "openai/m"])
def test_a_tool_case_against_completions_is_refused_before_the_run(
    tmp_path: Path, target: str
) -> None:
    (tmp_path / "t.yaml").write_text(TOOL)
    spec = RunSpec.build([tmp_path / "t.yaml"],
                         TargetSpec(target, api="completions", base_url="http://127.0.0.1:9/v1"),
                         Plan(runs=1, warmup=0), out=tmp_path / "runs")  # fmt: skip
    with pytest.raises(TargetError, match=r"case 't' has tools \(get\).*--api chat"):
        api.run(spec, interruptible=False)
    assert not (tmp_path / "runs").exists()  # nothing was started, nothing to clean up


def test_a_tool_case_runs_where_the_api_has_tools(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(TOOL)
    spec = RunSpec.build([tmp_path / "t.yaml"], TargetSpec("mock"), Plan(runs=1, warmup=0),
                         out=tmp_path / "runs")  # fmt: skip
    assert api.run(spec, interruptible=False).meta["status"] == "completed"
