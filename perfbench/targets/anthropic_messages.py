"""Anthropic Messages: requests, and the event stream (message_start … message_stop) or whole
replies read with per-token timing."""

from __future__ import annotations

from typing import Any

import orjson

from perfbench.http import CallFailed, Response
from perfbench.suite import Case
from perfbench.targets import sse
from perfbench.targets.chat import Messages, ModelReply, ToolCall, json_object
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

        def event(event: sse.Event) -> None:
            nonlocal stopped
            doc = json_object(event.data)
            kind = doc.get("type")
            if kind == "error":
                raise CallFailed("stream_error", str((doc.get("error") or {}).get("message")))
            stopped |= kind == "message_stop"
            _apply(kind, doc, reply, blocks, text, call)

        await sse.read(response, call.arrived, event)
        if not stopped:
            raise CallFailed("malformed_stream", "the stream ended before message_stop")
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


def _apply(
    kind: Any,
    doc: dict[str, Any],
    reply: ModelReply,
    blocks: dict[int, ToolCall],
    text: list[str],
    call: ModelCall,
) -> None:
    if kind == "message_start":
        usage = (doc.get("message") or {}).get("usage") or {}
        reply.tokens_in = usage.get("input_tokens")
    elif kind == "content_block_start":
        block = doc.get("content_block") or {}
        if block.get("type") == "tool_use":
            blocks[doc.get("index", len(blocks))] = ToolCall(block.get("id", ""), block["name"])
    elif kind == "content_block_delta":
        _delta(doc, blocks, text, call)
    elif kind == "message_delta":
        usage = doc.get("usage") or {}
        reply.tokens_out = usage.get("output_tokens", reply.tokens_out)
        reply.finish = (doc.get("delta") or {}).get("stop_reason") or reply.finish


def _delta(
    doc: dict[str, Any], blocks: dict[int, ToolCall], text: list[str], call: ModelCall
) -> None:
    delta = doc.get("delta") or {}
    kind = delta.get("type")
    if kind == "text_delta" and delta.get("text"):
        call.token(content=True)
        text.append(delta["text"])
    elif kind == "input_json_delta" and delta.get("partial_json"):
        call.token(content=False)
        block = blocks.get(doc.get("index", -1))
        if block is not None:
            block.arguments += delta["partial_json"]
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
    usage = doc.get("usage") or {}
    return ModelReply(
        text="".join(b.get("text", "") for b in content if b.get("type") == "text"),
        tool_calls=[
            ToolCall(b.get("id", ""), b.get("name", ""), orjson.dumps(b.get("input", {})).decode())
            for b in content
            if b.get("type") == "tool_use"
        ],
        tokens_in=usage.get("input_tokens"),
        tokens_out=usage.get("output_tokens"),
        finish=doc.get("stop_reason"),
    )
