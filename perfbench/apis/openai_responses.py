"""The OpenAI Responses API (``POST /v1/responses``): requests, and the event stream
(``response.created`` … ``response.completed``) or the whole ``response`` object, read with
per-token timing. The wire format is the one the official ``openai`` SDK sends and parses
(``openai.types.responses``).

The conversation is stateless, as the Chat Completions path is: every call sends the whole
``input`` (no ``previous_response_id``), so the prompt grows turn by turn the same way and the
two APIs' runs compare. A turn's output items go back into the next input as they came
(``input += response.output``, OpenAI's function-calling guide): that carries the reasoning
items a reasoning model needs before the function calls they led to. ``store`` is left to the
API's default (true), under which those items are referenced by id; with ``store: false`` they
would need ``include: ["reasoning.encrypted_content"]``, which this client does not ask for.

Timing: an output text delta, a refusal delta, a function call's opening
(``response.output_item.added``: its name is generated output) and its argument deltas are
tokens; reasoning text and summary deltas are tokens for TTFT and gaps, not for TTFO (as
``reasoning_content`` in Chat Completions). A reasoning item's opening is not: hidden reasoning
opens its item before the thinking it stands for.

``response.failed`` and ``error`` events are ``stream_error`` failures. ``response.incomplete``
is not a failure: it is Chat Completions' ``finish_reason: length`` (or ``content_filter``),
an answer cut short, and is read as one, so the two APIs classify the same replies the same way.
"""

from __future__ import annotations

from typing import Any

from perfbench.apis import sse
from perfbench.apis.chat import (
    PIECES,
    Messages,
    ModelReply,
    ToolCall,
    count,
    exact_output,
    json_object,
    text_of,
    usage_dict,
)
from perfbench.apis.openai_common import OpenAIApi, error_message, function, model_name
from perfbench.http import CallFailed, Response
from perfbench.suite import Case
from perfbench.task import ModelCall

_STARTED = frozenset({"response.created", "response.in_progress", "response.queued"})
_FINISHED = frozenset({"response.completed", "response.incomplete"})
_REASONING = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})


class OpenAIResponses(OpenAIApi):
    name = "openai-responses"

    def opening(self, case: Case) -> Messages:
        # The case's system prompt goes in ``instructions`` (request), which the API applies to
        # each request on its own; a conversation's own system messages stay input items.
        if case.input is not None:
            return [{"role": "user", "content": case.input}]
        return [{"role": m.role, "content": m.content} for m in case.messages or []]

    def request(self, case: Case, messages: Messages, stream: bool) -> tuple[str, dict[str, Any]]:
        body = self.body(case, "input", messages)
        if case.system:
            body["instructions"] = case.system
        if case.tools:
            # The flat function tool. ``strict`` is said outright: the Responses API makes
            # function tools strict unless told, and strict mode refuses any schema without
            # ``additionalProperties: false`` and every property required, as a case's may be.
            body["tools"] = [
                {"type": "function", **function(t), "strict": False} for t in case.tools
            ]
        if case.max_tokens is not None:
            body["max_output_tokens"] = case.max_tokens
        exact_output(body, case, self.extras, cap="max_output_tokens")
        if stream:
            body["stream"] = True  # usage comes in response.completed: nothing to ask for
        return "/responses", body

    async def receive(self, response: Response, call: ModelCall, stream: bool) -> ModelReply:
        if not stream or not sse.is_stream(response):  # a server may ignore "stream": true
            return _whole(await response.aread())
        events = _Stream(call)
        await sse.read(response, call.arrived, events.event)
        return events.reply()

    def extend(
        self, messages: Messages, reply: ModelReply, results: list[tuple[ToolCall, str]]
    ) -> None:
        messages.extend(reply.items or _items_of(reply))
        messages.extend(
            {"type": "function_call_output", "call_id": c.id, "output": result}
            for c, result in results
        )


class _Stream:
    """One response's events: output items by ``output_index`` as they open, grow by deltas
    and close whole (as the SDK's stream accumulator keeps them), until the final event."""

    __slots__ = ("call", "final", "items", "model", "texts")

    def __init__(self, call: ModelCall) -> None:
        self.call = call
        self.items: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, list[str]] = {}  # text deltas per message item
        self.final: dict[str, Any] | None = None  # the response of the last event
        self.model: str | None = None

    def event(self, event: sse.Event) -> None:
        if self.final is not None:
            return  # read on to the end (the connection goes back to the pool whole)
        doc = json_object(event.data)
        kind = doc.get("type")
        # Deltas first: they are most of a stream's events.
        if kind == "response.output_text.delta":
            delta = text_of(doc.get("delta"), "an output_text delta")
            if delta:
                self.call.token(content=True)
                index = _index(doc)
                texts = self.texts.get(index)
                if texts is None:  # the item's first text (the server may never have opened it)
                    texts = self.texts[index] = []
                    self._item(index, "message")
                texts.append(delta)
                if len(texts) > PIECES:  # joined as the stream goes: memory (chat.PIECES)
                    texts[:] = ["".join(texts)]
        elif kind == "response.function_call_arguments.delta":
            delta = text_of(doc.get("delta"), "a function_call_arguments delta")
            item = self._item(_index(doc), "function_call")
            if delta:
                self.call.token(content=False)
                item["arguments"] = text_of(item.get("arguments"), "arguments") + delta
        elif kind in _REASONING:
            if doc.get("delta"):
                self.call.token(content=False)
        elif kind == "response.refusal.delta":
            if doc.get("delta"):
                self.call.token(content=True)
        else:
            self._lifecycle(kind, doc)

    def _lifecycle(self, kind: Any, doc: dict[str, Any]) -> None:
        if kind == "response.output_item.added":
            item = _object(doc.get("item"), "an output item")
            self.items[_index(doc)] = dict(item)
            if item.get("type") == "function_call":  # its name is the call's first output
                self.call.token(content=False)
        elif kind == "response.function_call_arguments.done":
            item = self._item(_index(doc), "function_call")
            item["arguments"] = text_of(doc.get("arguments"), "a function call's arguments")
        elif kind == "response.output_item.done":
            self.items[_index(doc)] = _object(doc.get("item"), "an output item")
        elif kind in _STARTED:
            self.model = self.model or model_name(usage_dict(doc.get("response")).get("model"))
        elif kind in _FINISHED:
            self.final = _object(doc.get("response"), f"{kind}'s response")
        elif kind == "response.failed":
            raise CallFailed("stream_error", _failure(usage_dict(doc.get("response"))))
        elif kind == "error":
            raise CallFailed("stream_error", error_message(doc.get("error") or doc))

    def _item(self, index: int, kind: str) -> dict[str, Any]:
        """The item a delta belongs to; one a server never opened is opened here."""
        return self.items.setdefault(index, {"type": kind})

    def reply(self) -> ModelReply:
        if self.final is None:
            raise CallFailed("malformed_stream", "the stream ended before response.completed")
        output = self.final.get("output")
        # The final response's output is whole (the SDK takes it too); a server that leaves
        # it empty is read from the items its events built.
        items = output if isinstance(output, list) and output else self._built()
        reply = _reply(items, self.final)
        reply.model = reply.model or self.model
        return reply

    def _built(self) -> list[Any]:
        out: list[Any] = []
        for index, item in sorted(self.items.items()):
            if item.get("type") == "message" and not _message_text(item) and index in self.texts:
                text = "".join(self.texts[index])
                item = {**item, "content": [{"type": "output_text", "text": text}]}
            out.append(item)
        return out


def _index(doc: dict[str, Any]) -> int:
    index = doc.get("output_index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise CallFailed("malformed_stream", f"{doc.get('type')} has no output_index")
    return index


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CallFailed("malformed_stream", f"{what} is {type(value).__name__}, not an object")
    return value


def _reply(items: list[Any], response: dict[str, Any]) -> ModelReply:
    """A reply from the response's output items (whole, or built from the stream)."""
    reply = ModelReply(model=model_name(response.get("model")))
    texts: list[str] = []
    for raw in items:
        item = _object(raw, "an output item")
        kind = item.get("type")
        if kind == "message":
            texts.append(_message_text(item))
        elif kind == "function_call":
            reply.tool_calls.append(
                ToolCall(
                    text_of(item.get("call_id"), "a function call's call_id"),
                    text_of(item.get("name"), "a function call's name"),
                    text_of(item.get("arguments"), "a function call's arguments"),
                )
            )
        elif kind == "reasoning":
            reply.reasoning_items += 1
    reply.text = "".join(texts)
    reply.items = items
    _usage(usage_dict(response.get("usage")), reply)
    reply.finish = _finish(response, reply)
    return reply


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        text_of(part.get("text"), "an output_text part's text")
        for part in content
        if isinstance(part, dict) and part.get("type") == "output_text"
    )


def _usage(usage: dict[str, Any], reply: ModelReply) -> None:
    """The Responses API's usage: input_tokens counts the cached ones too
    (``input_tokens_details``), output_tokens the reasoning ones (``output_tokens_details``)."""
    reply.tokens_in = count(usage.get("input_tokens"))
    reply.tokens_out = count(usage.get("output_tokens"))
    given = usage_dict(usage.get("input_tokens_details"))
    reply.cache_read = count(given.get("cached_tokens"))
    reply.cache_write = count(given.get("cache_write_tokens"))
    reply.reasoning = count(usage_dict(usage.get("output_tokens_details")).get("reasoning_tokens"))


def _finish(response: dict[str, Any], reply: ModelReply) -> str:
    """Chat Completions' words for how the answer ended, so both APIs' replies read alike."""
    if response.get("status") == "incomplete":
        reason = usage_dict(response.get("incomplete_details")).get("reason")
        return "length" if reason == "max_output_tokens" else str(reason or "incomplete")
    return "tool_calls" if reply.tool_calls else "stop"


def _items_of(reply: ModelReply) -> list[dict[str, Any]]:
    """The model's turn as input items, for a reply that came without output items."""
    items: list[dict[str, Any]] = (
        [{"role": "assistant", "content": reply.text}] if reply.text else []
    )
    items += [
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
        for c in reply.tool_calls
    ]
    return items


def _whole(raw: bytes) -> ModelReply:
    doc = json_object(raw)
    if doc.get("status") == "failed" or isinstance(doc.get("error"), dict):
        raise CallFailed("stream_error", _failure(doc))
    output = doc.get("output")
    if not isinstance(output, list):
        raise CallFailed("malformed_stream", "reply has no output list")
    return _reply(output, doc)


def _failure(response: dict[str, Any]) -> str:
    """A failed response's words: ``response failed: server_error: <message>``."""
    error = usage_dict(response.get("error"))
    code = error.get("code")
    words = error_message(error) if error else "no error given"
    return f"response failed: {code}: {words}"[:300] if code else f"response failed: {words}"[:300]
