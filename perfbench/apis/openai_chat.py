"""OpenAI Chat Completions (and every OpenAI-compatible server: vLLM, Ollama, LiteLLM, DeepSeek,
Qwen, GLM): requests, and streamed or whole replies read with per-token timing."""

from __future__ import annotations

import functools
from typing import Any

import orjson

from perfbench.apis import sse
from perfbench.apis.chat import (
    PIECES,
    Messages,
    ModelReply,
    ToolCall,
    exact_output,
    json_object,
    openai_stream,
    text_of,
    usage_dict,
)
from perfbench.apis.openai_common import (
    OpenAIApi,
    chunk_end,
    function,
    model_name,
    read_stream,
    read_usage,
)
from perfbench.http import CallFailed, Response
from perfbench.suite import Case
from perfbench.task import ModelCall


class OpenAIChat(OpenAIApi):
    name = "openai"

    def opening(self, case: Case) -> Messages:
        messages: Messages = [{"role": "system", "content": case.system}] if case.system else []
        if case.input is not None:
            return [*messages, {"role": "user", "content": case.input}]
        return [*messages, *({"role": m.role, "content": m.content} for m in case.messages or [])]

    def request(self, case: Case, messages: Messages, stream: bool) -> tuple[str, dict[str, Any]]:
        body = self.body(case, "messages", messages)
        if case.tools:
            body["tools"] = [{"type": "function", "function": function(t)} for t in case.tools]
        if case.max_tokens is not None:
            body["max_tokens"] = case.max_tokens
        exact_output(body, case, self.extras)
        openai_stream(body, stream)
        return "/chat/completions", body

    async def receive(self, response: Response, call: ModelCall, stream: bool) -> ModelReply:
        if not stream or not sse.is_stream(response):  # a server may ignore "stream": true
            return _whole(await response.aread())
        reply = ModelReply()
        calls: dict[int, ToolCall] = {}
        text: list[str] = []
        # partial, not a lambda: one Python frame less per event
        await read_stream(response, call, functools.partial(_apply, reply, calls, text, call))
        reply.text = "".join(text)
        reply.tool_calls = [calls[i] for i in sorted(calls)]
        return reply

    def extend(
        self, messages: Messages, reply: ModelReply, results: list[tuple[ToolCall, str]]
    ) -> None:
        turn: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            turn["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        messages.append(turn)
        messages.extend(
            {"role": "tool", "tool_call_id": c.id, "content": result} for c, result in results
        )


def _apply(
    reply: ModelReply,
    calls: dict[int, ToolCall],
    text: list[str],
    call: ModelCall,
    chunk: dict[str, Any],
) -> None:
    # Runs for every chunk of every stream: the common delta (content only) takes the fewest
    # lookups, and absent keys are tested before values are fetched.
    choices = chunk.get("choices")
    if choices:
        for choice in choices:
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if len(delta) == 1 and content and type(content) is str:
                    # The usual delta, content alone, inline: _delta's first branch
                    call.token(content=True)
                    text.append(content)
                    if len(text) > PIECES:  # joined as the stream goes: memory (chat.PIECES)
                        text[:] = ["".join(text)]
                else:
                    _delta(delta, calls, text, call)
            finish = choice.get("finish_reason")
            if finish:
                reply.finish = finish
    chunk_end(chunk, reply)


def _delta(
    delta: dict[str, Any], calls: dict[int, ToolCall], text: list[str], call: ModelCall
) -> None:
    content = delta.get("content")
    if content and isinstance(content, str):
        call.token(content=True)
        text.append(content)
        if len(text) > PIECES:  # joined as the stream goes: memory (chat.PIECES)
            text[:] = ["".join(text)]
    if len(delta) == 1 and content is not None:
        return
    # Reasoning deltas (DeepSeek's reasoning_content, OpenRouter/vLLM's reasoning) carry
    # tokens too: they count for TTFT and ITL, not for time to first output.
    if delta.get("reasoning_content") or delta.get("reasoning"):
        call.token(content=False)
    for part in delta.get("tool_calls") or ():
        _tool_delta(part, calls, call)


def _tool_delta(part: dict[str, Any], calls: dict[int, ToolCall], call: ModelCall) -> None:
    index = part.get("index", len(calls))
    entry = calls.setdefault(index, ToolCall(id="", name=""))
    entry.id = text_of(part.get("id"), "a tool call's id") or entry.id
    fn = part.get("function") or {}
    entry.name = text_of(fn.get("name"), "a tool call's name") or entry.name
    arguments = fn.get("arguments")
    if arguments:
        entry.arguments += text_of(arguments, "a tool call's arguments")
    if arguments or fn.get("name"):
        call.token(content=False)


def _whole(raw: bytes) -> ModelReply:
    doc = json_object(raw)
    try:
        message = doc["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise CallFailed("malformed_stream", "reply has no choices[0].message") from exc
    reply = ModelReply(
        text=_content(message.get("content")),
        tool_calls=[_whole_call(c) for c in message.get("tool_calls") or ()],
        finish=doc["choices"][0].get("finish_reason"),
        model=model_name(doc.get("model")),
    )
    read_usage(usage_dict(doc.get("usage")), reply)
    return reply


def _content(value: Any) -> str:
    """A message's content: text, or (some servers) a list of text parts."""
    if isinstance(value, list):
        return "".join(text_of(p.get("text"), "a content part's text") for p in value)
    return text_of(value, "the message's content")


def _whole_call(call: dict[str, Any]) -> ToolCall:
    fn = call["function"]
    arguments = fn.get("arguments")
    if isinstance(arguments, dict):  # some servers send the object itself
        arguments = orjson.dumps(arguments).decode()
    return ToolCall(
        text_of(call.get("id"), "a tool call's id"),
        text_of(fn["name"], "a tool call's name"),
        text_of(arguments, "a tool call's arguments"),
    )
