"""The legacy completions client (``apis/openai_completions.py``) in the agent loop, against
respx under virtual time: ``text_completion`` chunks as OpenAI and vLLM stream them, whole
replies, the prompt a case becomes, and a case with tools refused by name."""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import respx

from perfbench.apis.openai_completions import DEFAULT_MAX_TOKENS, OpenAICompletions
from perfbench.engine.runner import Runner
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Recorder
from perfbench.suite import Suite, load_suite
from perfbench.targets.agent_loop import ModelAgent
from tests.helpers import write_suite

pytestmark = pytest.mark.anyio

BASE = "http://test/v1"
URL = f"{BASE}/completions"
KEY = "sk-secret"

TEXT = """
cases:
  - id: text
    language: en
    system: You complete sentences.
    input: The capital of France is
    max_tokens: 50
    expect: {output_contains: [paris]}
"""
CONVERSATION = """
cases:
  - id: talk
    language: en
    messages:
      - {role: system, content: Be brief.}
      - {role: user, content: Hi}
      - {role: assistant, content: Hello!}
      - {role: user, content: "Where is Paris?"}
"""
TOOLS = """
cases:
  - id: with-tools
    language: en
    input: Where is my order?
    tools:
      - {name: get_order, description: Look it up, result: shipped}
"""


def streamed(chunks: Sequence[tuple[float, bytes]]) -> httpx.Response:
    async def gen() -> AsyncIterator[bytes]:
        for delay, data in chunks:
            await anyio.sleep(delay)
            yield data

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=gen())


def chunk(text: str | None = None, finish: str | None = None, **extra: Any) -> bytes:
    """One ``text_completion`` chunk; ``text=None``: no choices (the usage chunk)."""
    choices = [] if text is None else [
        {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
    ]  # fmt: skip
    doc = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m-served",
           "choices": choices, **extra}  # fmt: skip
    return b"data: " + orjson.dumps(doc) + b"\n\n"


def usage(prompt: int, completion: int, **details: Any) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, **details}  # fmt: skip


DONE = b"data: [DONE]\n\n"


def suite_of(tmp_path: Path, text: str = TEXT) -> Suite:
    return load_suite([write_suite(tmp_path / "s.yaml", text)])


async def measure(suite: Suite, **kw: Any) -> Sample:
    agent = ModelAgent(OpenAICompletions("m"), BASE, name="openai/m", key=KEY, **kw)
    samples: list[Sample] = []
    try:
        recorder = Recorder(
            Summarizer({c.id: c.timeout_s for c in suite.cases}), None, [samples.append]
        )
        await Runner(suite, agent, Plan(runs=1, warmup=0), recorder).run()
    finally:
        await agent.aclose()
    [sample] = samples
    assert KEY not in json.dumps(sample.to_json())
    return sample


async def test_a_streamed_completion_is_timed_per_text_chunk_with_usage(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(URL).mock(
        return_value=streamed(
            [
                (0.250, chunk(" Paris")),
                (0.020, chunk(",")),
                (0.020, chunk(" of course.")),
                (0, chunk("", "stop")),
                (0, chunk(usage=usage(7, 3, prompt_tokens_details={"cached_tokens": 4}))),
                (0, DONE),
            ]
        )
    )
    s = await measure(suite_of(tmp_path))
    assert (s.status, s.expect_ok, s.model_calls, s.tool_calls) == ("ok", True, 1, 0)
    assert s.ttft == pytest.approx(0.250, abs=1e-9)
    assert s.ttfo == pytest.approx(0.250, abs=1e-9)
    assert s.itl_mean == pytest.approx(0.020, abs=1e-9)
    assert (s.tokens_in, s.tokens_out, s.tokens_cache_read) == (7, 3, 4)
    assert (s.model_served, s.steps[0].name) == ("m-served", "openai-completions")
    request = route.calls.last.request
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(request.content) == {
        "model": "m",
        "prompt": "You complete sentences.\n\nThe capital of France is",
        "temperature": 0.0,
        "max_tokens": 50,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_a_conversation_is_one_transcript_and_max_tokens_is_never_the_apis_16(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(URL).mock(
        return_value=httpx.Response(
            200,
            json={
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "m",
                "choices": [{"text": " In France.", "index": 0, "finish_reason": "stop"}],
                "usage": usage(20, 3),
            },
        )
    )
    s = await measure(suite_of(tmp_path, CONVERSATION), stream=False)
    assert (s.status, s.tokens_in, s.tokens_out) == ("ok", 20, 3)
    body = json.loads(route.calls.last.request.content)
    assert body["prompt"] == (
        "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: Where is Paris?\n\nAssistant:"
    )
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS and "stream" not in body


async def test_a_case_with_tools_is_refused_by_name_without_a_request(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(URL)
    s = await measure(suite_of(tmp_path, TOOLS))
    assert (s.status, s.error_kind) == ("error", "unhandled:TargetError")
    assert s.error is not None
    assert "case 'with-tools' has tools (get_order)" in s.error and "--api chat" in s.error
    assert route.call_count == 0


async def collect_garbage() -> None:
    """Finalize the body generators a rejected stream abandons, under this test's filter."""
    gc.collect()
    for _ in range(30):
        await anyio.sleep(0.001)


@pytest.mark.filterwarnings("ignore:Async generator:ResourceWarning")
@pytest.mark.parametrize(
    ("chunks", "kind", "words"),
    [
        ([chunk("Hi"), b"data: {not json\n\n"], "malformed_stream", "not JSON"),
        ([chunk("Hi"), chunk(None, error={"message": "engine died"})], "stream_error", "died"),
        ([chunk("Hi"), chunk(None, choices=[{"text": 5}])], "malformed_stream", "not a string"),
        ([chunk("Hi"), chunk("", "stop")], "malformed_stream", "before data: [DONE]"),
    ],
    ids=["not-json", "error-chunk", "text-not-string", "no-done"],
)
async def test_a_broken_stream_is_a_classified_failure(
    tmp_path: Path, respx_mock: respx.MockRouter, chunks: list[bytes], kind: str, words: str
) -> None:
    respx_mock.post(URL).mock(return_value=streamed([(0.1, c) for c in chunks]))
    s = await measure(suite_of(tmp_path))
    await collect_garbage()
    assert (s.status, s.error_kind) == ("error", kind)
    assert s.error is not None and words in s.error


async def test_a_whole_reply_without_choices_is_malformed(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(return_value=httpx.Response(200, json={"object": "text_completion"}))
    s = await measure(suite_of(tmp_path), stream=False)
    assert (s.status, s.error_kind) == ("error", "malformed_stream")
