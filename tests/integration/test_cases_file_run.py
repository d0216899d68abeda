"""A run of many cases writes its per-case figures to cases.jsonl (store/cases.py), and
`show`, `compare` and `report` read them from there as they did from summary.json. INLINE is
lowered so that cases/answer.yaml's 4 cases count as many."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from perfbench import api, store
from perfbench.cli import app
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.store import cases
from tests.helpers import CASES


def _run(out: Path) -> Path:
    spec = RunSpec.build([CASES / "answer.yaml"], TargetSpec("mock:zero"),
                         Plan(runs=2, warmup=0), out=out)  # fmt: skip
    result = api.run(spec)
    assert result.run_dir is not None
    return result.run_dir


def test_many_cases_go_to_cases_jsonl_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _run(tmp_path / "whole")  # 4 cases: in summary.json
    monkeypatch.setattr(cases, "INLINE", 2)
    split = _run(tmp_path / "split")
    assert not (whole / store.CASES).exists()
    assert orjson.loads((split / store.SUMMARY).read_bytes())["schema"] == cases.SCHEMA
    ids = [orjson.loads(line)["id"] for line in (split / store.CASES).read_bytes().splitlines()]
    assert sorted(ids) == sorted(
        orjson.loads((whole / store.SUMMARY).read_bytes())["pooled"]["cases"]
    )
    cli = CliRunner()
    shown = cli.invoke(app, ["show", str(split), "--details"])
    assert shown.exit_code == 0, shown.output
    assert all(case in shown.output for case in ids)
    compared = cli.invoke(app, ["compare", str(whole), str(split), "--scope", "cases"])
    assert compared.exit_code in (0, 1), compared.output
    assert all(case in compared.output for case in ids)
    reported = cli.invoke(app, ["report", str(split), "-o", str(tmp_path / "report")])
    assert reported.exit_code == 0, reported.output
    assert ids[0] in (tmp_path / "report" / "report.md").read_text()
