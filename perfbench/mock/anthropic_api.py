"""Anthropic Messages on the wire: request → Turn, Reply → JSON body or the event stream
(message_start … message_stop), and errors in Anthropic's shape. Pure: no I/O."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson

from perfbench.mock.limiter import Quota
from perfbench.mock.simulator import Call, Reply, ToolChoice, ToolSpec, Turn
from perfbench.mock.wire import ApiError, Frames, chunks_of, named, retry_headers

_CHOICES: dict[str, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def parse(body: Any, key: str, case: str | None, *, counting: bool = False) -> Turn:
    """The Turn a Messages request asks for; ``counting``: a count_tokens request, which has
    no ``max_tokens``."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request_error", "the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "invalid_request_error", "messages: must be a non-empty list")
    max_tokens = body.get("max_tokens")
    if not counting and (not isinstance(max_tokens, int) or max_tokens < 1):
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
    choice, forced, parallel = _tool_choice(body.get("tool_choice"), tools)
    return Turn(
        model=str(body.get("model") or ""),
        messages=tuple(texts),
        tools=tools,
        tool_results=tool_results,
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        key=key,
        case=case,
        tool_choice=choice,
        forced_tool=forced,
        parallel=parallel,
        schema=_schema(body),
    )


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> tuple[ToolChoice, str | None, bool]:
    """Anthropic's ``{type: auto | any | tool | none, name, disable_parallel_tool_use}``."""
    if value is None:
        return "auto", None, True
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        raise ApiError(
            400,
            "invalid_request_error",
            "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'",
        )
    assert isinstance(value, dict)
    parallel = value.get("disable_parallel_tool_use") is not True
    if kind == "tool":
        name = value.get("name")
        if not isinstance(name, str):
            raise ApiError(400, "invalid_request_error", "tool_choice.name: Field required")
        return "required", named(name, tools, "tool_choice.name"), parallel
    return _CHOICES[kind], None, parallel


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """Structured outputs: ``output_config.format`` (or the beta's ``output_format``)."""
    config = body.get("output_config")
    found = config.get("format") if isinstance(config, dict) else body.get("output_format")
    if isinstance(found, dict) and found.get("type") == "json_schema":
        schema = found.get("schema")
        return schema if isinstance(schema, dict) else {}
    return None


def count_tokens(tokens: int) -> bytes:
    """The body of ``POST /v1/messages/count_tokens``."""
    return orjson.dumps({"input_tokens": tokens})


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
    if not reply.calls:
        return [{"type": "text", "text": reply.text}]
    return [_tool_use(call, orjson.loads(reply.arguments(call))) for call in reply.calls]


def _tool_use(call: Call, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": _tool_use_id(call), "name": call.name, "input": arguments}


def _tool_use_id(call: Call) -> str:
    return "toolu_" + call.id[len("call_") :]


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
    head = [_event("message_start", {"type": "message_start", "message": start})]
    if reply.calls:
        tokens = _tool_frames(reply)
        last = len(reply.calls) - 1
    else:
        text = {"type": "text", "text": ""}
        head.append(_block_start(0, text))
        delta = {"type": "text_delta", "text": ""}
        template = _event(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        tokens = chunks_of(reply.pieces, template, b'"text":""', b'"text":')
        last = 0
    head.append(_event("ping", {"type": "ping"}))
    tail = [
        _block_stop(last),
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


def _tool_frames(reply: Reply) -> list[bytes]:
    """One frame per argument token; a tool_use block starts with its call's first token (the
    name is generated output) and the block before it stops there."""
    tokens: list[bytes] = []
    for i, call in enumerate(reply.calls):
        delta = {"type": "input_json_delta", "partial_json": ""}
        template = _event(
            "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        )
        frames = chunks_of(
            reply.pieces[call.start : call.end],
            template,
            b'"partial_json":""',
            b'"partial_json":',
        )
        opening = _block_start(i, _tool_use(call, {}))
        frames[0] = (_block_stop(i - 1) if i else b"") + opening + frames[0]
        tokens += frames
    return tokens


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return _event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _block_stop(index: int) -> bytes:
    return _event("content_block_stop", {"type": "content_block_stop", "index": index})


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
