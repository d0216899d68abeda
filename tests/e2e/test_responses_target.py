"""The model APIs of the agent loop over real HTTP, against the embedded mock server on loopback
(``mock+http`` with ``TargetSpec.api``): a Responses API run reports TTFT, tokens and tool
calls as a Chat Completions run of the same suite does, as does an Anthropic Messages one; a
legacy completions run does for a tool-less suite. And the official openai SDK's
``client.completions`` against the mock's ``/v1/completions``, streamed and not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from perfbench import api
from perfbench.spec import Plan, RunSpec, TargetSpec
from tests.helpers import CASES, mock_process

# Fast and fixed: the draws (tokens, tool calls) depend only on the seed and each call's key,
# which is the same in every API's run, so the runs compare call for call.
PROFILE = """
name: apis
ttft_ms: 5
itl_ms: 0.5
output_chars: 120
models: {sim: {tokens_per_char: {default: 0.25}}}
"""


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "apis.yaml"
    path.write_text(PROFILE)
    return path


def run(folder: Path, profile: Path, files: list[str], **target: Any) -> list[dict[str, Any]]:
    spec = RunSpec.build(
        [CASES / f for f in files],
        TargetSpec(f"mock+http:{profile}", preflight=False, **target),
        Plan(runs=1, warmup=0, concurrency=4),
        out=folder / "runs",
    )
    result = api.run(spec, interruptible=False)
    assert result.run_dir is not None
    meta = json.loads((result.run_dir / "meta.json").read_text())
    assert meta["spec"]["target"]["api"] == target.get("api")  # recorded, for --resume
    lines = (result.run_dir / "samples.jsonl").read_text().splitlines()
    return sorted(map(json.loads, lines), key=lambda s: s["case"])


def steps(sample: dict[str, Any]) -> list[str]:
    return [s["name"] if s["kind"] == "tool" else "model" for s in sample["steps"]]


def assert_measured(samples: list[dict[str, Any]], stream: bool = True) -> None:
    for s in samples:
        assert (s["status"], s["error_kind"]) == ("ok", None), s
        if stream:
            assert s["ttft"] is not None and 0 < s["ttft"] < s["latency"]
        else:  # a whole reply has no first token, on any API
            assert s["ttft"] is None and s["latency"] > 0
        assert s["tokens_in"] > 0 and s["tokens_out"] > 0 and not s["tokens_estimated"]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_responses_run_reports_what_a_chat_run_does(
    tmp_path: Path, profile: Path, stream: bool
) -> None:
    files = ["lookup.yaml", "plan.yaml"]
    chat = run(tmp_path / "chat", profile, files, stream=stream)
    responses = run(tmp_path / "responses", profile, files, api="responses", stream=stream)
    assert [s["case"] for s in chat] == [s["case"] for s in responses]
    assert_measured(chat, stream)
    assert_measured(responses, stream)
    for c, r in zip(chat, responses, strict=True):
        assert (r["model_calls"], r["tool_calls"], r["expect_ok"]) == (
            c["model_calls"],
            c["tool_calls"],
            True,
        )
        assert steps(r) == steps(c) and r["tool_calls"] >= 1
        assert r["tokens_out"] == c["tokens_out"]  # the same replies, token for token
        assert {st["name"] for st in r["steps"] if st["kind"] == "model"} == {"openai-responses"}


def test_a_messages_run_of_the_mock_reports_the_same_tool_calls(
    tmp_path: Path, profile: Path
) -> None:
    chat = run(tmp_path / "chat", profile, ["lookup.yaml"])
    messages = run(tmp_path / "messages", profile, ["lookup.yaml"], api="messages")
    assert_measured(messages)
    assert [steps(s) for s in messages] == [steps(s) for s in chat]


def test_a_completions_run_reports_ttft_and_tokens_for_a_tool_less_suite(
    tmp_path: Path, profile: Path
) -> None:
    chat = run(tmp_path / "chat", profile, ["answer.yaml"])
    completions = run(tmp_path / "completions", profile, ["answer.yaml"], api="completions")
    assert_measured(completions)
    assert [s["case"] for s in completions] == [s["case"] for s in chat]
    for c, t in zip(chat, completions, strict=True):
        assert (t["model_calls"], t["tool_calls"]) == (1, 0)
        assert t["tokens_out"] == c["tokens_out"]  # max_tokens 300 cuts neither
        assert t["steps"][0]["name"] == "openai-completions"


@pytest.fixture(scope="module")
def url(profile: Path) -> Iterator[str]:
    with mock_process(profile) as base:
        yield base


@pytest.fixture
def oai(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0) as client:
        yield client


def test_the_sdks_completions_create_whole(oai: openai.OpenAI) -> None:
    done = oai.completions.create(model="gpt-3.5-turbo-instruct", prompt="Say hi", max_tokens=8)
    assert done.object == "text_completion" and done.id.startswith("cmpl-")
    [choice] = done.choices
    assert choice.finish_reason == "length" and choice.text
    assert done.usage is not None and done.usage.completion_tokens == 8
    assert done.usage.total_tokens == done.usage.prompt_tokens + 8 and done.usage.prompt_tokens > 0
    # Without max_tokens the API's default of 16 holds (a 30-token answer is cut there).
    default = oai.completions.create(model="m", prompt=["Say hi"])
    assert default.usage is not None and default.usage.completion_tokens == 16
    assert default.choices[0].finish_reason == "length"


def test_the_sdks_completions_create_streamed(oai: openai.OpenAI) -> None:
    chunks = list(
        oai.completions.create(
            model="m",
            prompt="Say hi",
            max_tokens=100,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = [c.choices[0].text for c in chunks if c.choices]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    *_, last = chunks
    assert last.usage is not None and last.choices == []
    # 120 characters at 0.25 tokens each: 30 tokens, one chunk each, then the finish.
    assert last.usage.completion_tokens == 30 == len([t for t in texts if t])
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert all(c.usage is None for c in chunks[:-1])


def test_the_mock_honours_min_tokens_and_ignore_eos_and_token_prompts(oai: openai.OpenAI) -> None:
    exact = oai.completions.create(
        model="m", prompt=[1, 2, 3, 4], max_tokens=50, extra_body={"ignore_eos": True}
    )
    assert exact.usage is not None
    assert (exact.usage.prompt_tokens, exact.usage.completion_tokens) == (4, 50)
    longer = oai.completions.create(
        model="m", prompt="Say hi", max_tokens=200, extra_body={"min_tokens": 40}
    )
    assert longer.usage is not None and longer.usage.completion_tokens == 40
    with pytest.raises(openai.BadRequestError, match="one prompt per request"):
        oai.completions.create(model="m", prompt=["a", "b"], max_tokens=5)
