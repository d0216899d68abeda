"""Anthropic Messages on the wire: request → Turn, Reply → JSON body or the event stream
(message_start … message_stop), and errors in Anthropic's shape. Pure: no I/O."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson

from perfbench.mock.limiter import Quota
from perfbench.mock.simulator import Reply, ToolSpec, Turn
from perfbench.mock.wire import ApiError, Frames, chunks_of, retry_headers

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def parse(body: Any, key: str, case: str | None) -> Turn:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request_error", "the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "invalid_request_error", "messages: must be a non-empty list")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ApiError(400, "invalid_request_error", "max_tokens: Field required")
    texts = [_text(body.get("system"))] if body.get("system") else []
    tool_results = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise ApiError(
                400,
                "invalid_request_error",
                f"messages.{i}.role: Input should be 'user' or 'assistant'",
            )
        content = message.get("content")
        texts.append(_text(content))
        if isinstance(content, list):
            tool_results += sum(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            )
    tools = tuple(_tool(t, i) for i, t in enumerate(body.get("tools") or []))
    return Turn(
        model=str(body.get("model") or ""),
        messages=tuple(texts),
        tools=tools,
        tool_results=tool_results,
        max_tokens=max_tokens,
        key=key,
        case=case,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(orjson.dumps(block.get("input", {})).decode())
        elif kind == "tool_result":
            parts.append(_text(block.get("content")))
    return "".join(parts)


def _tool(tool: Any, i: int) -> ToolSpec:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise ApiError(400, "invalid_request_error", f"tools.{i}.name: Field required")
    schema = tool.get("input_schema")
    return ToolSpec(tool["name"], schema if isinstance(schema, dict) else {})


def _content(reply: Reply) -> list[dict[str, Any]]:
    if reply.tool_name is None:
        return [{"type": "text", "text": reply.text}]
    return [
        {
            "type": "tool_use",
            "id": _tool_use_id(reply),
            "name": reply.tool_name,
            "input": orjson.loads(reply.text),
        }
    ]


def _tool_use_id(reply: Reply) -> str:
    return "toolu_" + (reply.tool_id or "")[len("call_") :]


def body(reply: Reply, request_id: str, model: str) -> bytes:
    return orjson.dumps(
        {
            "id": request_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": _content(reply),
            "stop_reason": STOP_REASONS[reply.finish],
            "stop_sequence": None,
            "usage": {
                "input_tokens": reply.prompt_tokens,
                "output_tokens": reply.completion_tokens,
            },
        }
    )


def stream(reply: Reply, request_id: str, model: str) -> Frames:
    start: dict[str, Any] = {
        "id": request_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": 1},
    }
    if reply.tool_name is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": ""}
        marker, opening = b'"text":""', b'"text":'
    else:
        block = {
            "type": "tool_use",
            "id": _tool_use_id(reply),
            "name": reply.tool_name,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": ""}
        marker, opening = b'"partial_json":""', b'"partial_json":'
    head = [
        _event("message_start", {"type": "message_start", "message": start}),
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        _event("ping", {"type": "ping"}),
    ]
    template = _event(
        "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    )
    tokens = chunks_of(reply.pieces, template, marker, opening)
    tail = [
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": STOP_REASONS[reply.finish], "stop_sequence": None},
                "usage": {"output_tokens": reply.completion_tokens},
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]
    broken = b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0,\n\n'
    return Frames(head=head, tokens=tokens, tail=tail, malformed=broken)


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error(err: ApiError) -> bytes:
    kind = ERROR_TYPES.get(err.status, "api_error")
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": err.message}})


def rate_headers(quota: Quota, now: datetime) -> dict[str, str]:
    """Anthropic's anthropic-ratelimit-* headers (resets as RFC 3339 times), and retry-after."""
    out: dict[str, str] = {}
    if quota.requests_limit is not None:
        out["anthropic-ratelimit-requests-limit"] = str(round(quota.requests_limit))
        out["anthropic-ratelimit-requests-remaining"] = str(quota.requests_remaining)
        out["anthropic-ratelimit-requests-reset"] = _at(now, quota.requests_reset)
    if quota.tokens_limit is not None:
        out["anthropic-ratelimit-tokens-limit"] = str(round(quota.tokens_limit))
        out["anthropic-ratelimit-tokens-remaining"] = str(quota.tokens_remaining)
        out["anthropic-ratelimit-tokens-reset"] = _at(now, quota.tokens_reset)
    if not quota.admitted:
        out.update(retry_headers(quota.retry_after))
    return out


def _at(now: datetime, seconds: float) -> str:
    return (now + timedelta(seconds=seconds)).isoformat(timespec="seconds").replace("+00:00", "Z")
