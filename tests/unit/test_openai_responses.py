"""The OpenAI Responses API client (``apis/openai_responses.py``) in the agent loop, against
respx under virtual time: the events are OpenAI's (``openai.types.responses``), streamed with
delays between them, so TTFT, gaps and tool latency come out exact. Also: choosing the API on
a ``TargetSpec`` (``api``) and recording it in a run's spec."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import respx

from perfbench.apis.anthropic_messages import AnthropicMessages
from perfbench.apis.openai_chat import OpenAIChat
from perfbench.apis.openai_completions import OpenAICompletions
from perfbench.apis.openai_responses import OpenAIResponses
from perfbench.engine.runner import Runner
from perfbench.errors import TargetError
from perfbench.sample import Sample
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Recorder
from perfbench.suite import Case, Suite, load_suite
from perfbench.targets.agent_loop import ModelAgent
from perfbench.targets.registry import resolve
from tests.helpers import write_suite

pytestmark = pytest.mark.anyio

BASE = "http://test/v1"
URL = f"{BASE}/responses"
KEY = "sk-secret"
SSE = {"content-type": "text/event-stream"}

CHAT = """
cases:
  - id: chat
    language: en
    system: Be brief.
    input: Hello there
    expect: {output_contains: [hello]}
"""
TOOL = """
cases:
  - id: tool
    language: en
    input: Where is the Louvre?
    max_tokens: 200
    tools:
      - name: lookup
        description: Look a place up
        parameters: {type: object, properties: {q: {type: string}}}
        result: found it
        latency_ms: 100
    expect: {tool_calls: [lookup], output_contains: [paris]}
"""

Chunk = tuple[float, bytes]


def streamed(chunks: Sequence[Chunk]) -> httpx.Response:
    """An event stream: each chunk waits its delay after the previous one (virtual time)."""

    async def gen() -> AsyncIterator[bytes]:
        for delay, data in chunks:
            await anyio.sleep(delay)
            yield data

    return httpx.Response(200, headers=SSE, content=gen())


def ev(kind: str, **fields: Any) -> bytes:
    """One event as OpenAI sends it: named, numbered, its type repeated in the data."""
    data = {"type": kind, "sequence_number": 0, **fields}
    return f"event: {kind}\n".encode() + b"data: " + orjson.dumps(data) + b"\n\n"


def usage(inp: int, out: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": inp + out,
    }


def response(
    output: list[dict[str, Any]], status: str = "completed", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": "m-2026-01-01",
        "output": output,
        "error": None,
        "incomplete_details": None,
        **extra,
    }


def message(text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [part]}  # fmt: skip


def function_call(arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": "fc_1", "type": "function_call", "status": status, "call_id": "call_1",
            "name": "lookup", "arguments": arguments}  # fmt: skip


REASONING = {"id": "rs_1", "type": "reasoning", "summary": [], "status": "completed"}


def created() -> Chunk:
    return (0, ev("response.created", response=response([], status="in_progress", usage=None)))


def text_stream(pieces: list[tuple[float, str]], done: dict[str, Any]) -> httpx.Response:
    text = "".join(p for _, p in pieces)
    opened = {**message(""), "status": "in_progress", "content": []}
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return streamed(
        [
            created(),
            (0, ev("response.output_item.added", output_index=0, item=opened)),
            (
                0,
                ev(
                    "response.content_part.added", **where, part={"type": "output_text", "text": ""}
                ),
            ),
            *(
                (d, ev("response.output_text.delta", **where, delta=p, logprobs=[]))
                for d, p in pieces
            ),
            (0, ev("response.output_text.done", **where, text=text, logprobs=[])),
            (0, ev("response.output_item.done", output_index=0, item=message(text))),
            (0, ev(done.pop("kind", "response.completed"), response=done)),
        ]
    )


def call_stream(parts: list[tuple[float, str]], first: float, *, reasoning: bool = False,
                tokens: dict[str, Any] | None = None) -> httpx.Response:  # fmt: skip
    """A function call: its item opens ``first`` s in, then its arguments in ``parts``."""
    arguments = "".join(p for _, p in parts)
    at = 1 if reasoning else 0
    head: list[Chunk] = [created()]
    if reasoning:  # the reasoning item opens at once; a summary delta is its first token
        head += [
            (0, ev("response.output_item.added", output_index=0,
                   item={**REASONING, "status": "in_progress"})),
            (0.05, ev("response.reasoning_summary_text.delta", item_id="rs_1", output_index=0,
                      summary_index=0, delta="Look it up.")),
            (0, ev("response.output_item.done", output_index=0, item=REASONING)),
        ]  # fmt: skip
    output = [REASONING, function_call(arguments)] if reasoning else [function_call(arguments)]
    return streamed(
        [
            *head,
            (first, ev("response.output_item.added", output_index=at,
                       item=function_call("", "in_progress"))),
            *((d, ev("response.function_call_arguments.delta", item_id="fc_1", output_index=at,
                     delta=p)) for d, p in parts),
            (0, ev("response.function_call_arguments.done", item_id="fc_1", output_index=at,
                   arguments=arguments)),
            (0, ev("response.output_item.done", output_index=at, item=function_call(arguments))),
            (0, ev("response.completed", response=response(output, usage=tokens or usage(20, 8)))),
        ]
    )  # fmt: skip


def suite_of(tmp_path: Path, text: str = CHAT) -> Suite:
    return load_suite([write_suite(tmp_path / "s.yaml", text)])


async def measure(suite: Suite, **kw: Any) -> Sample:
    agent = ModelAgent(OpenAIResponses("m"), BASE, name="openai/m", key=KEY, **kw)
    samples: list[Sample] = []
    try:
        recorder = Recorder(
            Summarizer({c.id: c.timeout_s for c in suite.cases}), None, [samples.append]
        )
        await Runner(suite, agent, Plan(runs=1, warmup=0), recorder).run()
    finally:
        await agent.aclose()
    [sample] = samples
    assert Sample.from_json(json.loads(json.dumps(sample.to_json()))) == sample
    assert KEY not in json.dumps(sample.to_json())
    return sample


async def collect_garbage() -> None:
    """Finalize the body generators a rejected stream abandons, under this test's filter (as
    tests/integration/test_model_clients.py does): many rounds, each a virtual millisecond."""
    gc.collect()
    for _ in range(30):
        await anyio.sleep(0.001)


def body_of(route: respx.Route, call: int = -1) -> Any:
    return json.loads(route.calls[call].request.content)


# --- streaming ---------------------------------------------------------------------------


async def test_a_streamed_answer_times_its_first_text_delta_and_reads_usage(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    done = response([message("Hello, hi")], usage=usage(9, 3, cached=4))
    route = respx_mock.post(URL).mock(
        return_value=text_stream([(0.300, "Hello"), (0.050, ","), (0.050, " hi")], done)
    )
    s = await measure(suite_of(tmp_path))
    assert (s.status, s.error_kind, s.expect_ok) == ("ok", None, True)
    # The message item and its empty part open at once: no output yet.
    assert s.ttft == pytest.approx(0.300, abs=1e-9)
    assert s.ttfo == pytest.approx(0.300, abs=1e-9)
    assert s.itl_mean == pytest.approx(0.050, abs=1e-9)
    assert s.latency == pytest.approx(0.400, abs=1e-9)
    assert (s.model_calls, s.tool_calls, s.tokens_in, s.tokens_out) == (1, 0, 9, 3)
    assert (s.tokens_cache_read, s.tokens_reasoning, s.tokens_estimated) == (4, 0, False)
    assert s.model_served == "m-2026-01-01"
    assert s.steps[0].name == "openai-responses"
    request = route.calls.last.request
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(request.content) == {
        "model": "m",
        "input": [{"role": "user", "content": "Hello there"}],
        "instructions": "Be brief.",
        "temperature": 0.0,
        "stream": True,
    }


async def test_a_streamed_function_call_is_timed_from_its_opening_and_sent_back(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    parts = [(0.050, '{"q":'), (0.050, ' "Lou'), (0.050, 'vre"}')]
    answer = response([message("In Paris.")], usage=usage(40, 3))
    route = respx_mock.post(URL).mock(
        side_effect=[call_stream(parts, first=0.200), text_stream([(0.100, "In Paris.")], answer)]
    )
    s = await measure(suite_of(tmp_path, TOOL))
    assert (s.status, s.expect_ok) == ("ok", True)
    assert (s.model_calls, s.tool_calls) == (2, 1)
    assert [step.name for step in s.steps] == ["openai-responses", "lookup", "openai-responses"]
    # TTFT: the call's item opening (its name is generated output), not its first argument.
    assert s.ttft == pytest.approx(0.200, abs=1e-9)
    assert s.ttfo == pytest.approx(0.350 + 0.100 + 0.100, abs=1e-9)  # the answer's first text
    assert (s.tokens_in, s.tokens_out) == (60, 11)
    first = body_of(route, 0)
    assert first["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look a place up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "strict": False,
        }
    ]
    assert first["max_output_tokens"] == 200
    second = body_of(route, 1)
    # The call goes back as the API returned it, its arguments whole, then its result.
    assert second["input"] == [
        {"role": "user", "content": "Where is the Louvre?"},
        function_call('{"q": "Louvre"}'),
        {"type": "function_call_output", "call_id": "call_1", "output": "found it"},
    ]


async def test_reasoning_items_go_back_before_their_call_and_count_for_ttft_not_ttfo(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    parts = [(0.050, '{"q": "Louvre"}')]
    tokens = usage(20, 30, reasoning=22)
    answer = response([message("In Paris.")], usage=usage(50, 3, reasoning=0))
    route = respx_mock.post(URL).mock(
        side_effect=[
            call_stream(parts, first=0.100, reasoning=True, tokens=tokens),
            text_stream([(0.100, "In Paris.")], answer),
        ]
    )
    s = await measure(suite_of(tmp_path, TOOL))
    assert (s.status, s.expect_ok) == ("ok", True)
    assert s.ttft == pytest.approx(0.050, abs=1e-9)  # the reasoning summary's delta
    assert s.tokens_reasoning == 22
    sent = body_of(route, 1)["input"]
    assert [item.get("type") for item in sent[1:]] == [
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent[1] == REASONING


async def test_an_incomplete_response_is_an_answer_cut_short_as_in_chat_completions(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    done = response(
        [{**message("Hello th"), "status": "incomplete"}],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        usage=usage(9, 2),
        kind="response.incomplete",
    )
    respx_mock.post(URL).mock(return_value=text_stream([(0.1, "Hello"), (0.01, " th")], done))
    s = await measure(suite_of(tmp_path))
    assert (s.status, s.expect_ok, s.tokens_out) == ("ok", True, 2)


async def test_a_stream_without_output_in_its_final_event_is_read_from_its_events(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    # Deltas alone, and a completed response whose output is empty (as some gateways send).
    where = {"item_id": "m", "output_index": 0, "content_index": 0}
    respx_mock.post(URL).mock(
        return_value=streamed(
            [
                (0.1, ev("response.output_text.delta", **where, delta="hello ")),
                (0.1, ev("response.output_text.delta", **where, delta="world")),
                (0, ev("response.completed", response=response([], usage=usage(3, 2)))),
            ]
        )
    )
    case = CHAT.replace("[hello]", "[hello world]")
    s = await measure(suite_of(tmp_path, case))
    assert (s.status, s.expect_ok, s.ttft, s.tokens_out) == ("ok", True, pytest.approx(0.1), 2)


# --- failures --------------------------------------------------------------------------------


FAILED = response(
    [], status="failed", error={"code": "server_error", "message": "The model crashed."}
)


@pytest.mark.filterwarnings("ignore:Async generator:ResourceWarning")
@pytest.mark.parametrize(
    ("events", "kind", "words"),
    [
        pytest.param(
            [ev("response.failed", response=FAILED)],
            "stream_error",
            "server_error: The model crashed.",
            id="response.failed",
        ),
        pytest.param(
            [ev("error", code="rate_limit_exceeded", message="Slow down.", param=None)],
            "stream_error",
            "Slow down.",
            id="error-event",
        ),
        pytest.param(
            [b'event: response.output_text.delta\ndata: {"type": "response.output_text\n\n'],
            "malformed_stream",
            "not JSON",
            id="not-json",
        ),
        pytest.param(
            [ev("response.output_text.delta", delta="Hi")],
            "malformed_stream",
            "no output_index",
            id="no-output-index",
        ),
        pytest.param(
            [ev("response.output_text.delta", output_index=0, content_index=0, delta=7)],
            "malformed_stream",
            "not a string",
            id="delta-not-text",
        ),
        pytest.param(
            [ev("response.output_text.delta", output_index=0, content_index=0, delta="Hi")],
            "malformed_stream",
            "ended before response.completed",
            id="cut-short",
        ),
    ],
)
async def test_a_failed_or_broken_stream_is_a_classified_failure(
    tmp_path: Path, respx_mock: respx.MockRouter, events: list[bytes], kind: str, words: str
) -> None:
    chunks = [created(), *((0.1, e) for e in events)]
    respx_mock.post(URL).mock(return_value=streamed(chunks))
    s = await measure(suite_of(tmp_path))
    await collect_garbage()
    assert (s.status, s.error_kind) == ("error", kind)
    assert s.error is not None and words in s.error
    assert s.steps[0].status == "error"


# --- whole replies ---------------------------------------------------------------------------


async def test_whole_replies_read_calls_text_and_usage(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(URL).mock(
        side_effect=[
            httpx.Response(200, json=response([function_call('{"q": "x"}')], usage=usage(20, 8))),
            httpx.Response(200, json=response([message("Paris")], usage=usage(40, 1, cached=16))),
        ]
    )
    s = await measure(suite_of(tmp_path, TOOL), stream=False)
    assert (s.status, s.expect_ok, s.tool_calls) == ("ok", True, 1)
    assert (s.tokens_in, s.tokens_out, s.tokens_cache_read) == (60, 9, 16)
    assert "stream" not in body_of(route, 0)
    assert body_of(route, 1)["input"][-1]["call_id"] == "call_1"


@pytest.mark.parametrize(
    ("doc", "kind"),
    [
        (FAILED, "stream_error"),
        ({"id": "resp_1", "object": "response", "status": "completed"}, "malformed_stream"),
        (response(["not an item"]), "malformed_stream"),
    ],
    ids=["failed", "no-output", "item-not-object"],
)
async def test_a_failed_or_broken_whole_reply_is_a_classified_failure(
    tmp_path: Path, respx_mock: respx.MockRouter, doc: dict[str, Any], kind: str
) -> None:
    respx_mock.post(URL).mock(return_value=httpx.Response(200, json=doc))
    s = await measure(suite_of(tmp_path), stream=False)
    assert (s.status, s.error_kind) == ("error", kind)


# --- choosing the API ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "api", "client", "path"),
    [
        ("openai/m", None, OpenAIChat, "/chat/completions"),
        ("openai/m", "chat", OpenAIChat, "/chat/completions"),
        ("deepseek/m", "responses", OpenAIResponses, "/responses"),
        ("openai/m", "completions", OpenAICompletions, "/completions"),
        ("anthropic/m", None, AnthropicMessages, "/messages"),
        ("anthropic/m", "messages", AnthropicMessages, "/messages"),
    ],
)
def test_the_api_field_picks_the_client(
    monkeypatch: pytest.MonkeyPatch, target: str, api: str | None, client: type, path: str
) -> None:
    monkeypatch.setenv("K", "x")
    agent = resolve(TargetSpec(target, api_key_env="K", api=api))
    assert isinstance(agent, ModelAgent) and isinstance(agent.api, client)
    case = Case(id="c", input="hi")
    assert agent.api.request(case, agent.api.opening(case), True)[0] == path


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (dict(target="openai/m", api="text"), "--api 'text': the model APIs are chat, respon"),
        (dict(target="anthropic/m", api="responses"), "not an API of anthropic/m"),
        (dict(target="openai/m", api="messages"), "OpenAI-compatible providers speak chat"),
        (dict(target="mock", api="chat"), "the in-process mock makes no API calls"),
        (dict(target="http+agent://127.0.0.1:9/x", api="chat"), "agents, which call"),
        (dict(target="python:m:f", api="responses"), "goes with model targets"),
    ],
)
def test_an_unknown_or_mismatched_api_is_refused(
    monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any], words: str
) -> None:
    monkeypatch.setenv("K", "x")
    with pytest.raises(TargetError, match=re.escape(words)):
        resolve(TargetSpec(**spec, api_key_env="K" if "/" in spec["target"] else None))


def test_the_api_is_recorded_in_the_run_spec_and_old_specs_still_load() -> None:
    spec = RunSpec(("/c",), TargetSpec("openai/m", api="responses"), Plan(runs=1))
    doc = json.loads(json.dumps(spec.to_doc()))
    assert doc["target"]["api"] == "responses"
    assert RunSpec.from_doc(doc) == spec
    del doc["target"]["api"]  # a run from before the field
    assert RunSpec.from_doc(doc).target.api is None


def test_mock_http_takes_the_api() -> None:
    from perfbench.targets.mock_http import MockHttp

    target = resolve(TargetSpec("mock+http:zero", api="responses"))
    assert isinstance(target, MockHttp) and isinstance(target.api, OpenAIResponses)
    assert isinstance(resolve(TargetSpec("mock+http:zero")).api, OpenAIChat)  # type: ignore[attr-defined]


def test_a_whole_reply_counts_its_reasoning_items_and_keeps_them_to_send_back() -> None:
    from perfbench.apis.openai_responses import _whole

    reply = _whole(orjson.dumps(response([REASONING, function_call("{}")], usage=usage(5, 9))))
    assert (reply.reasoning_items, [c.name for c in reply.tool_calls]) == (1, ["lookup"])
    assert reply.items == [REASONING, function_call("{}")] and reply.finish == "tool_calls"


async def test_a_reply_without_usage_is_estimated_from_the_input_sent(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(return_value=httpx.Response(200, json=response([message("Hi")])))
    s = await measure(suite_of(tmp_path), stream=False)
    assert (s.status, s.tokens_estimated, s.tokens_out) == ("ok", True, 1)
    # The input items as JSON, not an empty list: more than the "[]" of a missing key.
    assert s.tokens_in is not None and s.tokens_in > 5
