"""Workload sources end to end: case files whose cases a ``source:`` block makes run against
the in-process mock like hand-written ones, a sample for every generated case, and their
language in the per-language table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfbench import api
from perfbench.engine.session import Session
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import load_suite, synthetic_suite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sources"


def workload(folder: Path, name: str, source: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"source": source}, ensure_ascii=False), "utf-8")
    return path


def run(case_file: Path, out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spec = RunSpec.build([case_file], TargetSpec("mock"), Plan(runs=1, warmup=0), out=out)
    result = api.run(spec)
    assert result.run_dir is not None and result.meta["status"] == "completed"
    lines = (result.run_dir / "samples.jsonl").read_text("utf-8").splitlines()
    return result.summary, [json.loads(line) for line in lines]


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("sharegpt", {"sharegpt": {"path": str(FIXTURES / "sharegpt.json")}}),
        ("prompts", {"prompts": {"path": str(FIXTURES / "prompts.jsonl")}}),
    ],
)
def test_a_source_case_file_runs_end_to_end(
    tmp_path: Path, name: str, source: dict[str, Any]
) -> None:
    case_file = workload(tmp_path, name, source)
    suite = load_suite([case_file])
    summary, samples = run(case_file, tmp_path / "runs")
    assert sorted(s["case"] for s in samples) == sorted(c.id for c in suite.cases)
    assert {s["status"] for s in samples} == {"ok"}
    assert set(summary["runs"][0]["cases"]) == {c.id for c in suite.cases}
    meta = json.loads(next((tmp_path / "runs").glob("*/meta.json")).read_text("utf-8"))
    assert suite.digest in json.dumps(meta)  # the run records the generated suite's digest
    asked = {c.id: c.output_tokens for c in suite.cases}
    for s in samples:  # the mock caps its answer at the length asked
        if asked[s["case"]] is not None:
            assert s["tokens_out"] <= asked[s["case"]]


def test_a_synthetic_zh_workload_has_a_zh_row(tmp_path: Path) -> None:
    source = {"synthetic": {"input": 96, "output": 12, "n": 8, "language": "zh", "seed": 3}}
    summary, samples = run(workload(tmp_path, "zh", source), tmp_path / "runs")
    assert len(samples) == 8 and {s["language"] for s in samples} == {"zh"}
    zh = summary["runs"][0]["languages"]["zh"]
    assert (zh["tasks"], zh["ok"]) == (8, 8)
    assert list(summary["across_runs"]["languages"]) == ["zh"]


@pytest.mark.anyio
async def test_the_flag_s_suite_runs_and_keeps_its_languages() -> None:
    suite = synthetic_suite("input=64,output=8,n=5,language=es,seed=1")
    spec = RunSpec(target=TargetSpec("mock"), plan=Plan(runs=1, warmup=0), out=None)
    result = await Session(spec, None, suite=suite).run()
    assert result.meta["status"] == "completed"
    assert result.summary["runs"][0]["languages"]["es"]["tasks"] == 5
