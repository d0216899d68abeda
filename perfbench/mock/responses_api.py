"""The OpenAI Responses API on the wire (``POST /v1/responses``): request → Turn, Reply → the
``response`` object or its event stream (``response.created`` … ``response.completed``, each
event numbered). What openai-agents' default model, pydantic-ai's ``OpenAIResponsesModel`` and
gateways that translate other APIs into this one send. Pure: no I/O; errors are OpenAI's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from perfbench.mock.openai_api import tool_choice, whole
from perfbench.mock.simulator import Call, Reply, ToolSpec, Turn
from perfbench.mock.wire import ApiError, Frames, function_tool, text_parts


@dataclass(frozen=True, slots=True)
class Context:
    """What the server kept of an earlier response, for a request that continues it by
    ``previous_response_id``: the tool results so far and the tokens already in context."""

    tool_results: int = 0
    tokens: int = 0


def parse(body: Any, key: str, case: str | None, context: Context = Context()) -> Turn:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request_error", "the body must be a JSON object")
    texts = [text_parts(body["instructions"])] if isinstance(body.get("instructions"), str) else []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not (items or context.tokens):
        raise ApiError(
            400, "invalid_request_error", "'input' must be a string or an array", param="input"
        )
    tool_results = context.tool_results
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError(
                400, "invalid_request_error", f"input[{i}] must be an object", param=f"input[{i}]"
            )
        kind = item.get("type", "message")
        tool_results += kind == "function_call_output"
        texts.append(_item_text(kind, item))
    tools = tuple(t for i, raw in enumerate(body.get("tools") or []) if (t := _tool(raw, i)))
    choice, forced = tool_choice(_function_choice(body.get("tool_choice")), tools)
    limit = body.get("max_output_tokens")
    return Turn(
        model=str(body.get("model") or ""),
        messages=tuple(texts),
        tools=tools,
        tool_results=tool_results,
        max_tokens=whole(limit),
        key=key,
        case=case,
        tool_choice=choice,
        forced_tool=forced,
        parallel=body.get("parallel_tool_calls") is not False,
        schema=_schema(body.get("text")),
        context_tokens=context.tokens,
        min_tokens=whole(body.get("min_tokens")),  # serving engines' fields, as chat's
        ignore_eos=body.get("ignore_eos") is True,
    )


def _item_text(kind: str, item: dict[str, Any]) -> str:
    if kind == "message":
        return text_parts(item.get("content"))
    if kind == "function_call":
        return str(item.get("arguments", ""))
    if kind == "function_call_output":
        return text_parts(item.get("output"))
    return ""  # reasoning, item references, hosted tools' items: nothing the mock counts


def _tool(tool: Any, i: int) -> ToolSpec | None:
    """A function tool; hosted tools (web_search, file_search…) the mock never calls."""
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        return None
    name = f"tools[{i}].name"
    return function_tool(tool, name, f"Missing required parameter: '{name}'.")


def _function_choice(value: Any) -> Any:
    # A hosted tool's choice ({type: web_search}…) leaves the function tools to the model.
    if isinstance(value, dict) and value.get("type") not in ("function", "allowed_tools"):
        return "auto"
    return value


def _schema(text: Any) -> dict[str, Any] | None:
    found = text.get("format") if isinstance(text, dict) else None
    if not isinstance(found, dict):
        return None
    if found.get("type") == "json_object":
        return {}
    if found.get("type") == "json_schema":
        schema = found.get("schema")
        return schema if isinstance(schema, dict) else {}
    return None


@dataclass(frozen=True, slots=True)
class Ids:
    """The ids a response's objects carry: the response's, and a stem for its output items."""

    response: str
    stem: str

    def message(self) -> str:
        return f"msg_{self.stem}"

    def call(self, i: int) -> str:
        return f"fc_{self.stem}_{i}"


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _message(ids: Ids, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [_part(text)]
    return {
        "id": ids.message(),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _function_call(ids: Ids, i: int, call: Call, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": ids.call(i),
        "type": "function_call",
        "status": status,
        "call_id": call.id,
        "name": call.name,
        "arguments": arguments,
    }


def _output(reply: Reply, ids: Ids) -> list[dict[str, Any]]:
    if reply.calls:
        return [
            _function_call(ids, i, call, reply.arguments(call), "completed")
            for i, call in enumerate(reply.calls)
        ]
    status = "incomplete" if reply.finish == "length" else "completed"
    return [_message(ids, reply.text, status)]


def _response(
    reply: Reply, request: dict[str, Any], ids: Ids, created: int, model: str, *, done: bool
) -> dict[str, Any]:
    """The ``response`` object: in progress (no output yet) or finished."""
    cut = reply.finish == "length"
    status = ("incomplete" if cut else "completed") if done else "in_progress"
    return {
        "id": ids.response,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if done and cut else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": model,
        "output": _output(reply, ids) if done else [],
        "parallel_tool_calls": request.get("parallel_tool_calls") is not False,
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": request.get("store") is not False,
        "temperature": request.get("temperature", 1.0),
        "text": request.get("text") or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p", 1.0),
        "truncation": request.get("truncation") or "disabled",
        "usage": _usage(reply) if done else None,
        "user": None,
        "metadata": request.get("metadata") or {},
    }


def body(reply: Reply, request: dict[str, Any], ids: Ids, created: int, model: str) -> bytes:
    """The non-streaming ``response`` object."""
    return orjson.dumps(_response(reply, request, ids, created, model, done=True))


class _Events:
    """SSE events numbered in order, as the API numbers them (``sequence_number``)."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.next, **fields}
        self.next += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"

    def deltas(self, kind: str, pieces: list[str], **fields: Any) -> list[bytes]:
        """One ``kind`` event per piece (its ``delta``), cut from one serialised template: a
        whole object per token would cost several times more, and tokens are most of a stream."""
        template = self(kind, **fields, delta="")
        self.next -= 1
        seq_at = template.index(b'"sequence_number":')
        seq_end = template.index(b",", seq_at)
        delta_at = template.index(b'"delta":""')
        head = template[: seq_at + len(b'"sequence_number":')]
        middle = template[seq_end : delta_at + len(b'"delta":')]
        tail = template[delta_at + len(b'"delta":""') :]
        dumps, first = orjson.dumps, self.next
        self.next += len(pieces)
        return [
            head + str(first + n).encode() + middle + dumps(p) + tail for n, p in enumerate(pieces)
        ]


def stream(reply: Reply, request: dict[str, Any], ids: Ids, created: int, model: str) -> Frames:
    """The event stream: created and in_progress at once; then per output item its
    ``output_item.added``, one delta per token, its ``.done`` events; then completed."""
    event = _Events()
    started = _response(reply, request, ids, created, model, done=False)
    head = [
        event("response.created", response=started),
        event("response.in_progress", response=started),
    ]
    if reply.calls:
        tokens, closing = _call_frames(reply, ids, event)
    else:
        tokens, closing = _text_frames(reply, ids, event, head)
    finished = _response(reply, request, ids, created, model, done=True)
    kind = "response.incomplete" if reply.finish == "length" else "response.completed"
    tail = [*closing, event(kind, response=finished)]
    broken = b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta",\n\n'
    return Frames(head=head, tokens=tokens, tail=tail, malformed=broken)


def _text_frames(
    reply: Reply, ids: Ids, event: _Events, head: list[bytes]
) -> tuple[list[bytes], list[bytes]]:
    # The message item and its empty part open before any token (as the role chunk does in
    # Chat Completions): they carry no generated output.
    item, where = ids.message(), {"output_index": 0, "content_index": 0}
    head.append(
        event("response.output_item.added", output_index=0, item=_message(ids, None, "in_progress"))
    )
    head.append(event("response.content_part.added", item_id=item, **where, part=_part("")))
    tokens = event.deltas(
        "response.output_text.delta", reply.pieces, item_id=item, **where, logprobs=[]
    )
    status = "incomplete" if reply.finish == "length" else "completed"
    closing = [
        event("response.output_text.done", item_id=item, **where, text=reply.text, logprobs=[]),
        event("response.content_part.done", item_id=item, **where, part=_part(reply.text)),
        event("response.output_item.done", output_index=0, item=_message(ids, reply.text, status)),
    ]
    return tokens, closing


def _call_frames(reply: Reply, ids: Ids, event: _Events) -> tuple[list[bytes], list[bytes]]:
    """Each call's item opens with its first token (its name is generated output) and the
    call before it closes there."""
    tokens: list[bytes] = []
    closing: list[bytes] = []
    for i, call in enumerate(reply.calls):
        opened = event(
            "response.output_item.added",
            output_index=i,
            item=_function_call(ids, i, call, "", "in_progress"),
        )
        deltas = event.deltas(
            "response.function_call_arguments.delta",
            reply.pieces[call.start : call.end],
            item_id=ids.call(i),
            output_index=i,
        )
        deltas[0] = b"".join(closing) + opened + deltas[0]
        tokens += deltas
        arguments = reply.arguments(call)
        closing = [
            event(
                "response.function_call_arguments.done",
                item_id=ids.call(i),
                output_index=i,
                name=call.name,
                arguments=arguments,
            ),
            event(
                "response.output_item.done",
                output_index=i,
                item=_function_call(ids, i, call, arguments, "completed"),
            ),
        ]
    return tokens, closing
