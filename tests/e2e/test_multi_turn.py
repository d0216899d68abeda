"""Multi-turn conversations (issue 23 item 1): a case of user `turns`, each sent after the
model's real answer to the one before, over every model API of the agent loop against the
mock server; each step knows its turn, and the summary has per-turn latency and TTFT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench import api
from perfbench.errors import TargetError
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import load_suite

CASE = Path(__file__).resolve().parents[1] / "fixtures" / "cases" / "multi_turn.yaml"


def _run(tmp_path: Path, target: str, api_name: str | None = None) -> api.RunResult:
    spec = RunSpec.build([CASE], TargetSpec(target, api=api_name), Plan(runs=2, warmup=0),
                         out=tmp_path / "runs")  # fmt: skip
    return api.run(spec, interruptible=False)


@pytest.mark.parametrize(
    ("target", "api_name"),
    [("mock+http", None), ("mock+http", "responses"), ("mock+http", "messages"), ("mock", None)],
)
def test_each_turn_follows_the_answer_to_the_last(
    tmp_path: Path, target: str, api_name: str | None
) -> None:
    result = _run(tmp_path, target, api_name)
    assert result.run_dir is not None
    lines = (result.run_dir / "samples.jsonl").read_text().splitlines()
    samples = [json.loads(line) for line in lines]
    assert len(samples) == 2 and all(s["status"] == "ok" for s in samples), samples
    for sample in samples:
        steps = sample["steps"]
        assert [s["turn"] for s in steps if s["kind"] == "model"][-2:] == [1, 2]
        assert {s["turn"] for s in steps} == {0, 1, 2} and sample["tool_calls"] == 1
        # Every turn's first call carries the whole conversation so far: more tokens in.
        firsts = [next(s for s in steps if s["kind"] == "model" and s["turn"] == t) for t in (1, 2)]
        lasts = [[s for s in steps if s["kind"] == "model" and s["turn"] == t][-1] for t in (0, 1)]
        for first, last in zip(firsts, lasts, strict=True):
            assert first["tokens_in"] > last["tokens_in"], (first, last)
    pooled = result.summary["pooled"]["overall"]
    assert pooled["turn_latency"]["n"] == 6 and pooled["turn_ttft"]["n"] == 6


def test_turns_are_one_of_input_messages_turns_and_change_no_other_digest(tmp_path: Path) -> None:
    suite = load_suite([CASE])
    assert suite.cases[0].turns is not None and len(suite.cases[0].turns) == 3
    both = tmp_path / "both.yaml"
    both.write_text("cases:\n  - {id: x, input: hi, turns: [a, b]}\n")
    with pytest.raises(Exception, match="exactly one of 'input', 'messages' or 'turns'"):
        load_suite([both])


def test_the_completions_api_refuses_a_conversation(tmp_path: Path) -> None:
    chat = tmp_path / "chat.yaml"
    chat.write_text("cases:\n  - {id: x, language: en, turns: [hi, 'and then?']}\n")
    spec = RunSpec.build([chat], TargetSpec("mock+http", api="completions"),
                         Plan(runs=1, warmup=0), out=tmp_path / "runs")  # fmt: skip
    with pytest.raises(TargetError, match="case 'x' has turns"):
        api.run(spec, interruptible=False)
