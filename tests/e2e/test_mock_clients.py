"""Real clients against `perfbench mock serve` in its own process, as their users call them: the
official openai SDK's Responses API (plain, streamed, parsed into a model), Chat Completions'
structured output and parallel tool calls, the anthropic SDK's count_tokens, and an
openai-agents agent on its default model. Loopback only: the agents SDK's tracing is off."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
import yaml
from pydantic import BaseModel

from tests.helpers import mock_process

# Tracing exports to OpenAI's servers unless turned off before the SDK is first used.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

PROFILE = {
    "name": "clients",
    "ttft_ms": 2,
    "itl_ms": 0.2,
    "output_chars": 60,
    "parallel_tool_calls": 2,
    "models": {"sim": {"tokens_per_char": {"default": 0.25}}},
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Forecast(BaseModel):
    city: str
    high_c: float
    rain: bool


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("mock") / "clients.yaml"
    path.write_text(yaml.safe_dump(PROFILE))
    with mock_process(path) as base:
        yield base


@pytest.fixture
def oai(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0) as client:
        yield client


def test_responses_create_calls_the_function_then_answers(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="gpt-4.1", input="Weather in Oslo?", tools=[WEATHER])  # type: ignore[list-item]
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "city-1"}
    assert first.usage is not None and first.usage.output_tokens > 0
    follow: list[Any] = [
        {"role": "user", "content": "Weather in Oslo?"},
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
    ]
    answer = oai.responses.create(model="gpt-4.1", input=follow, tools=[WEATHER])  # type: ignore[list-item]
    assert answer.status == "completed" and answer.output_text
    # Continued by id instead of resending the conversation: the server kept the context.
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
    chained = oai.responses.create(
        model="gpt-4.1",
        previous_response_id=first.id,
        input=[result],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert chained.output_text and chained.previous_response_id == first.id


def test_responses_stream_with_a_function_tool(oai: openai.OpenAI) -> None:
    with oai.responses.stream(model="gpt-4.1", input="Weather?", tools=[WEATHER]) as stream:  # type: ignore[list-item]
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    [call] = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "city-1"}
    with oai.responses.stream(model="gpt-4.1", input="Say hello") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text and text == final.output_text
    assert final.usage is not None and final.usage.output_tokens == 15


def test_structured_output_parses_into_the_callers_model(oai: openai.OpenAI) -> None:
    parsed = oai.responses.parse(model="gpt-4.1", input="Forecast?", text_format=Forecast)
    assert isinstance(parsed.output_parsed, Forecast)
    chat = oai.chat.completions.parse(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Forecast?"}],
        response_format=Forecast,
    )
    assert isinstance(chat.choices[0].message.parsed, Forecast)


def test_chat_parallel_tool_calls_accumulate_in_the_sdks_stream(oai: openai.OpenAI) -> None:
    tools: Any = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in ("get_order", "get_invoice", "get_refund")
    ]
    messages: Any = [{"role": "user", "content": "Everything about A-1"}]
    with oai.chat.completions.stream(model="gpt-4o", messages=messages, tools=tools) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_order", "get_invoice"]  # type: ignore[union-attr]
    assert len({c.id for c in calls}) == 2
    one = oai.chat.completions.create(
        model="gpt-4o", messages=messages, tools=tools, parallel_tool_calls=False
    )
    assert len(one.choices[0].message.tool_calls or []) == 1
    forced = oai.chat.completions.create(
        model="gpt-4o",
        messages=messages,
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_refund"}},
    )
    assert [c.function.name for c in forced.choices[0].message.tool_calls or []] == ["get_refund"]  # type: ignore[union-attr]


def test_an_unknown_route_is_not_found_in_openais_words(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        oai.post("/completionz", cast_to=object, body={})
    assert raised.value.code is None and "Invalid URL (POST /v1/completionz)" in str(raised.value)


def test_anthropic_count_tokens(url: str) -> None:
    with anthropic.Anthropic(api_key="k", base_url=url, max_retries=0) as claude:
        counted = claude.messages.count_tokens(
            model="claude-sonnet-4-5", messages=[{"role": "user", "content": "x" * 200}]
        )
        sent = claude.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=20,
            messages=[{"role": "user", "content": "x" * 200}],
        )
    assert counted.input_tokens == sent.usage.input_tokens == 50


def test_an_openai_agents_agent_on_its_default_model(url: str) -> None:
    agents = pytest.importorskip("agents")
    calls: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    async def run() -> tuple[Any, Any]:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
        agents.set_tracing_disabled(True)
        agents.set_default_openai_client(client, use_for_tracing=False)
        agent = agents.Agent(name="weather", instructions="Answer briefly.", tools=[get_weather])
        assert agent.model is None  # the SDK's default model, over the Responses API
        try:
            plain = await agents.Runner.run(agent, "Weather in Oslo?")
            streamed = agents.Runner.run_streamed(agent, "Weather in Rome?")
            async for _ in streamed.stream_events():
                pass
            return plain, streamed
        finally:
            await client.close()

    plain, streamed = asyncio.run(run())
    assert calls == ["city-1", "city-1"]
    assert isinstance(plain.final_output, str) and plain.final_output
    assert isinstance(streamed.final_output, str) and streamed.final_output
    assert all(str(r.response_id).startswith("resp_") for r in plain.raw_responses)
