"""What OpenAI's three APIs (``openai_chat``, ``openai_responses``, ``openai_completions``)
share: the start of every request (model, the conversation under the API's own key,
temperature; bearer authentication), a function tool's declaration, the event stream of Chat
Completions and legacy completions, their usage object, and the words of an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfbench.apis import sse
from perfbench.apis.chat import ModelReply, bearer, count, json_object, usage_dict
from perfbench.http import CallFailed, Response
from perfbench.suite import Case, Tool
from perfbench.task import ModelCall


class OpenAIApi:
    """The model asked, and whether the server takes vLLM's ``min_tokens``/``ignore_eos``
    (``chat.exact_output``)."""

    def __init__(self, model: str, *, extras: bool = False) -> None:
        self.model = model
        self.extras = extras

    def body(self, case: Case, key: str, conversation: Any) -> dict[str, Any]:
        """A request's first keys: the conversation goes under the API's ``key`` (messages,
        input, prompt)."""
        return {"model": self.model, key: conversation, "temperature": case.temperature}

    def headers(self, key: str | None) -> dict[str, str]:
        return bearer(key)


def function(tool: Tool) -> dict[str, Any]:
    """A tool as OpenAI declares a function (nested in Chat Completions, flat in Responses)."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


async def read_stream(
    response: Response, call: ModelCall, on_chunk: Callable[[dict[str, Any]], None]
) -> None:
    """An OpenAI-style event stream (Chat Completions, legacy completions): each chunk to
    ``on_chunk``, an ``error`` chunk (vLLM reports a failure mid-stream so) a stream_error,
    and a stream without its closing ``data: [DONE]`` malformed."""
    done = False

    def event(event: sse.Event) -> None:
        nonlocal done
        if event.data == "[DONE]":
            done = True  # read on to the end: the connection goes back to the pool whole
            return
        chunk = json_object(event.data)
        if "error" in chunk:
            raise CallFailed("stream_error", error_message(chunk["error"]))
        on_chunk(chunk)

    await sse.read(response, call.arrived, event)
    if not done:
        raise CallFailed("malformed_stream", "the stream ended before data: [DONE]")


def chunk_end(chunk: dict[str, Any], reply: ModelReply) -> None:
    """What a streamed chunk says besides its choices: the usage (in the last chunk, with
    ``stream_options``) and the model that answered (the first chunk that names it)."""
    usage = chunk.get("usage")
    if usage and isinstance(usage, dict):
        read_usage(usage, reply)
    if reply.model is None and "model" in chunk:
        reply.model = model_name(chunk["model"])


def read_usage(usage: dict[str, Any], reply: ModelReply) -> None:
    """Chat Completions' usage object (the SDK's ``CompletionUsage`` serves legacy completions
    too): prompt_tokens counts the cached ones too (``prompt_tokens_details``),
    completion_tokens the reasoning ones (``completion_tokens_details``). A count that is not
    a whole number ≥ 0 leaves what was known."""
    for key, value in (("prompt_tokens", "tokens_in"), ("completion_tokens", "tokens_out")):
        found = count(usage.get(key))
        if found is not None:
            setattr(reply, value, found)
    cached = count(usage_dict(usage.get("prompt_tokens_details")).get("cached_tokens"))
    reasoning = count(usage_dict(usage.get("completion_tokens_details")).get("reasoning_tokens"))
    reply.cache_read = cached if cached is not None else reply.cache_read
    reply.reasoning = reasoning if reasoning is not None else reply.reasoning


def model_name(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def error_message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)[:300]
    return str(error)[:300]
