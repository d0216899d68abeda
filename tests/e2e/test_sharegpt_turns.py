"""ShareGPT conversations as multi-turn cases end to end: with ``turns: all`` a 3-turn
conversation runs against the mock as one task of three turns, each sent after the model's
real answer to the one before, each asked the length the source worked out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench import api
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.stats.advice import advise
from perfbench.suite import load_suite

TURNS = Path(__file__).resolve().parents[1] / "fixtures" / "sources" / "sharegpt_turns.json"


@pytest.mark.parametrize("target", ["mock", "mock+http"])
def test_a_sharegpt_conversation_runs_turn_by_turn(tmp_path: Path, target: str) -> None:
    (entry,) = [e for e in json.loads(TURNS.read_text("utf-8")) if e["id"] == "mt_three"]
    (tmp_path / "sg.json").write_text(json.dumps([entry]), "utf-8")
    case_file = tmp_path / "workload.yaml"
    case_file.write_text("source:\n  sharegpt: {path: sg.json, turns: all}\n", "utf-8")
    (case,) = load_suite([case_file]).cases
    spec = RunSpec.build([case_file], TargetSpec(target), Plan(runs=1, warmup=0),
                         out=tmp_path / "runs")  # fmt: skip
    result = api.run(spec, interruptible=False)
    assert result.run_dir is not None and result.meta["status"] == "completed"
    lines = (result.run_dir / "samples.jsonl").read_text("utf-8").splitlines()
    (sample,) = [json.loads(line) for line in lines]
    assert sample["status"] == "ok", sample
    models = [s for s in sample["steps"] if s["kind"] == "model"]
    assert [s["turn"] for s in models] == [0, 1, 2]  # turns are numbered from 0
    # Each turn carries the conversation so far, the model's answers included.
    assert models[0]["tokens_in"] < models[1]["tokens_in"] < models[2]["tokens_in"]
    assert result.summary["pooled"]["overall"]["turn_latency"]["n"] == 3
    if target == "mock+http":  # it honours the length asked (the in-process mock caps it)
        assert [s["tokens_out"] for s in models] == [case.output_tokens] * 3
        # Honoured turn by turn: the task's total is three times the length, not a miss.
        notes = advise(result.summary, result.meta)
        assert not [n for n in notes if "another output length" in n], notes
