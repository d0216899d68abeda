"""Anthropic Messages: requests, and the event stream (message_start … message_stop) or whole
replies read with per-token timing."""

from __future__ import annotations

from typing import Any

import orjson

from perfbench.apis import sse
from perfbench.apis.chat import (
    PIECES,
    Messages,
    ModelReply,
    ToolCall,
    count,
    json_object,
    text_of,
    usage_dict,
)
from perfbench.http import CallFailed, Response
from perfbench.suite import Case
from perfbench.task import ModelCall

VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024  # Anthropic requires max_tokens; a case may set its own


class AnthropicMessages:
    name = "anthropic"

    def __init__(self, model: str) -> None:
        self.model = model

    def opening(self, case: Case) -> Messages:
        if case.input is not None:
            return [{"role": "user", "content": case.input}]
        return [
            {"role": m.role, "content": m.content}
            for m in case.messages or []
            if m.role != "system"
        ]

    def request(self, case: Case, messages: Messages, stream: bool) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": case.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
            "temperature": case.temperature,
        }
        system = case.system or "\n".join(
            m.content for m in case.messages or [] if m.role == "system"
        )
        if system:
            body["system"] = system
        if case.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in case.tools
            ]
        if stream:
            body["stream"] = True
        return "/messages", body

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    async def receive(self, response: Response, call: ModelCall, stream: bool) -> ModelReply:
        if not stream or not sse.is_stream(response):
            return _whole(await response.aread())
        reply = ModelReply()
        blocks: dict[int, ToolCall] = {}
        text: list[str] = []
        stopped = False
        counts = _Counts()

        def event(event: sse.Event) -> None:
            nonlocal stopped
            doc = json_object(event.data)
            kind = doc.get("type")
            if kind == "error":
                raise CallFailed("stream_error", str((doc.get("error") or {}).get("message")))
            stopped |= kind == "message_stop"
            _apply(kind, doc, reply, blocks, text, call, counts)

        await sse.read(response, call.arrived, event)
        if not stopped:
            raise CallFailed("malformed_stream", "the stream ended before message_stop")
        counts.into(reply)
        reply.text = "".join(text)
        reply.tool_calls = [blocks[i] for i in sorted(blocks)]
        return reply

    def extend(
        self, messages: Messages, reply: ModelReply, results: list[tuple[ToolCall, str]]
    ) -> None:
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c)}
            for c in reply.tool_calls
        ]
        messages.append({"role": "assistant", "content": content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": result}
                    for c, result in results
                ],
            }
        )


class _Counts:
    """Anthropic's usage over a stream: ``message_start`` carries it, and ``message_delta``
    may again (gateways translating to this format send ``input_tokens: 0`` first and the count
    at the end): a count given later wins, as in the official SDK's stream accumulator, except
    a zero after a count. ``input_tokens`` leaves out the cache's tokens, which are added here
    (genai-prices counts input so)."""

    __slots__ = ("output", "plain", "read", "write")

    def __init__(self) -> None:
        self.plain: int | None = None
        self.read: int | None = None
        self.write: int | None = None
        self.output: int | None = None

    def update(self, usage: dict[str, Any]) -> None:
        self.plain = _later(self.plain, usage.get("input_tokens"))
        self.read = _later(self.read, usage.get("cache_read_input_tokens"))
        self.write = _later(self.write, usage.get("cache_creation_input_tokens"))
        self.output = _later(self.output, usage.get("output_tokens"))

    def into(self, reply: ModelReply) -> None:
        if self.plain is not None:
            reply.tokens_in = self.plain + (self.read or 0) + (self.write or 0)
        reply.tokens_out = self.output
        reply.cache_read, reply.cache_write = self.read, self.write


def _later(known: int | None, given: Any) -> int | None:
    found = count(given)
    if found is None or (found == 0 and known):
        return known
    return found


def _apply(
    kind: Any,
    doc: dict[str, Any],
    reply: ModelReply,
    blocks: dict[int, ToolCall],
    text: list[str],
    call: ModelCall,
    counts: _Counts,
) -> None:
    if kind == "message_start":
        message = usage_dict(doc.get("message"))
        counts.update(usage_dict(message.get("usage")))
        model = message.get("model")
        reply.model = model if isinstance(model, str) and model else None
    elif kind == "content_block_start":
        block = doc.get("content_block") or {}
        if block.get("type") == "tool_use":
            blocks[doc.get("index", len(blocks))] = ToolCall(
                text_of(block.get("id"), "a tool_use block's id"),
                text_of(block["name"], "a tool_use block's name"),
            )
    elif kind == "content_block_delta":
        _delta(doc, blocks, text, call)
    elif kind == "message_delta":
        counts.update(usage_dict(doc.get("usage")))
        reply.finish = (doc.get("delta") or {}).get("stop_reason") or reply.finish


def _delta(
    doc: dict[str, Any], blocks: dict[int, ToolCall], text: list[str], call: ModelCall
) -> None:
    delta = doc.get("delta") or {}
    kind = delta.get("type")
    if kind == "text_delta" and delta.get("text"):
        call.token(content=True)
        text.append(text_of(delta["text"], "a text_delta's text"))
        if len(text) > PIECES:  # joined as the stream goes: memory (chat.PIECES)
            text[:] = ["".join(text)]
    elif kind == "input_json_delta" and delta.get("partial_json"):
        call.token(content=False)
        block = blocks.get(doc.get("index", -1))
        if block is not None:
            block.arguments += text_of(delta["partial_json"], "an input_json_delta")
    elif kind == "thinking_delta" and delta.get("thinking"):
        call.token(content=False)


def _input(call: ToolCall) -> Any:
    try:
        return orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        return {}


def _whole(raw: bytes) -> ModelReply:
    doc = json_object(raw)
    content = doc.get("content")
    if not isinstance(content, list):
        raise CallFailed("malformed_stream", "reply has no content list")
    model = doc.get("model")
    reply = ModelReply(
        text="".join(
            text_of(b.get("text"), "a text block's text")
            for b in content
            if b.get("type") == "text"
        ),
        tool_calls=[
            ToolCall(
                text_of(b.get("id"), "a tool_use block's id"),
                text_of(b.get("name"), "a tool_use block's name"),
                orjson.dumps(b.get("input", {})).decode(),
            )
            for b in content
            if b.get("type") == "tool_use"
        ],
        finish=doc.get("stop_reason"),
        model=model if isinstance(model, str) and model else None,
    )
    counts = _Counts()
    counts.update(usage_dict(doc.get("usage")))
    counts.into(reply)
    return reply
