"""OpenAI Chat Completions on the wire: request → Turn, Reply → JSON body or SSE chunks, and
errors in OpenAI's shape. Pure: bytes in and out, no I/O."""

from __future__ import annotations

from typing import Any

import orjson

from perfbench.mock.limiter import Quota
from perfbench.mock.simulator import Reply, ToolChoice, ToolSpec, Turn
from perfbench.mock.wire import (
    ApiError,
    Frames,
    chunks_of,
    function_tool,
    named,
    retry_headers,
    text_parts,
)


def parse(body: Any, key: str, case: str | None) -> Turn:
    """The Turn a request body asks for; ``ApiError`` (400) when it is not a valid request."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request_error", "the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(
            400, "invalid_request_error", "'messages' must be a non-empty array", param="messages"
        )
    texts: list[str] = []
    tool_results = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise ApiError(
                400,
                "invalid_request_error",
                f"messages[{i}] needs a 'role'",
                param=f"messages[{i}]",
            )
        tool_results += message["role"] == "tool"
        texts.append(text_parts(message.get("content")))
        for call in message.get("tool_calls") or []:
            texts.append(str((call.get("function") or {}).get("arguments", "")))
    tools = tuple(_tool(t, i) for i, t in enumerate(body.get("tools") or []))
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    choice, forced = tool_choice(body.get("tool_choice"), tools)
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
        parallel=body.get("parallel_tool_calls") is not False,
        schema=_schema(body.get("response_format")),
        min_tokens=whole(body.get("min_tokens")),
        ignore_eos=body.get("ignore_eos") is True,
    )


def tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> tuple[ToolChoice, str | None]:
    """``tool_choice`` of Chat Completions (``{type: function, function: {name}}``) or of the
    Responses API (``{type: function, name}``): (auto | none | required, a named tool)."""
    if value is None or value == "auto":
        return "auto", None
    if not tools and value != "none":
        raise ApiError(
            400,
            "invalid_request_error",
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified.",
            param="tool_choice",
        )
    if value in ("none", "required"):
        return value, None
    if isinstance(value, dict):
        if value.get("type") == "allowed_tools":  # a subset of the tools: still the model's pick
            return "auto", None
        fn = value.get("function")
        name = (fn or {}).get("name") if isinstance(fn, dict) else value.get("name")
        if isinstance(name, str):
            return "required", named(name, tools, "tool_choice")
    raise ApiError(
        400,
        "invalid_request_error",
        "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a function.",
        param="tool_choice",
    )


def _schema(value: Any) -> dict[str, Any] | None:
    """The JSON schema ``response_format`` asks the answer to fit ({} for json_object)."""
    if not isinstance(value, dict):
        return None
    if value.get("type") == "json_object":
        return {}
    if value.get("type") == "json_schema":
        spec = value.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else {}
    return None


def whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tool(tool: Any, i: int) -> ToolSpec:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return function_tool(fn, f"tools[{i}]", f"tools[{i}].function.name is required")


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def body(reply: Reply, request_id: str, created: int, model: str) -> bytes:
    """The non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": reply.arguments(call)},
            }
            for call in reply.calls
        ]
    else:
        message["content"] = reply.text
    return orjson.dumps(
        {
            "id": request_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish}
            ],
            "usage": _usage(reply),
            "system_fingerprint": "fp_perfbench_mock",
        }
    )


def stream(reply: Reply, request_id: str, created: int, model: str, usage: bool) -> Frames:
    """SSE frames: the role chunk at once, one chunk per token, then finish, usage, [DONE]."""
    base = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": "fp_perfbench_mock",
    }
    extra = {"usage": None} if usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice], **extra})

    head = [chunk({"role": "assistant", "content": None if reply.calls else ""})]
    if reply.calls:
        tokens = [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for i, call in enumerate(reply.calls)
            for p in reply.pieces[call.start : call.end]
        ]
        for i, call in enumerate(reply.calls):
            # The chunk naming a tool is generated output: it goes out with the call's first
            # token, not with the headers, or a client would see output before the model made it.
            naming = {
                "index": i,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            tokens[call.start] = chunk({"tool_calls": [naming]}) + tokens[call.start]
    else:
        empty = {"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": None}
        whole = _sse({**base, "choices": [empty], **extra})
        tokens = chunks_of(reply.pieces, whole, b'"content":""', b'"content":')
    tail = [chunk({}, reply.finish)]
    if usage:
        tail.append(_sse({**base, "choices": [], "usage": _usage(reply)}))
    tail.append(b"data: [DONE]\n\n")
    broken = b'data: {"id": "' + request_id.encode() + b'", "choices": [{"delta": {"content": \n\n'
    return Frames(head=head, tokens=tokens, tail=tail, malformed=broken)


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}


def error(err: ApiError) -> bytes:
    kind, code = ERROR_TYPES.get(err.status, ("server_error", None))
    return orjson.dumps(
        {
            "error": {
                "message": err.message,
                "type": err.kind or kind,
                "param": err.param,
                "code": err.code or code,
            }
        }
    )


def rate_headers(quota: Quota) -> dict[str, str]:
    """OpenAI's x-ratelimit-* headers, plus retry-after(-ms) on a refusal."""
    out: dict[str, str] = {}
    if quota.requests_limit is not None:
        out["x-ratelimit-limit-requests"] = str(round(quota.requests_limit))
        out["x-ratelimit-remaining-requests"] = str(quota.requests_remaining)
        out["x-ratelimit-reset-requests"] = _duration(quota.requests_reset)
    if quota.tokens_limit is not None:
        out["x-ratelimit-limit-tokens"] = str(round(quota.tokens_limit))
        out["x-ratelimit-remaining-tokens"] = str(quota.tokens_remaining)
        out["x-ratelimit-reset-tokens"] = _duration(quota.tokens_reset)
    if not quota.admitted:
        out.update(retry_headers(quota.retry_after))
    return out


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``120ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s"
