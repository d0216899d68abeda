"""What the built-in agent loop needs from a model API, whatever its wire format: the types it
exchanges and the ``ChatApi`` protocol that ``openai_chat``, ``openai_responses``,
``openai_completions`` and ``anthropic_messages`` implement.
A call that fails raises ``CallFailed`` (``perfbench.http.failures``) with a kind from
``sample.ERROR_KINDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from perfbench.http import CallFailed, Response
from perfbench.suite import Case, Suite
from perfbench.task import ModelCall

Messages = list[dict[str, Any]]
EXCERPT = 300  # characters of a refused answer's body kept in its sample
# A stream's text pieces held before they are joined into one: a piece is a str object of its
# own (~50 bytes for a 1-character token), so a 64 MiB stream of tiny tokens (a compression
# bomb, up to limits.MAX_BODY) held ~70 MiB of them; joined every PIECES, a few MiB.
PIECES = 8192


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str = ""  # JSON text as the model produced it


@dataclass(slots=True)
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens_in: int | None = None  # every input token, cached or not (as genai-prices counts)
    tokens_out: int | None = None  # every output token, reasoning included
    finish: str | None = None
    cache_read: int | None = None  # of tokens_in: read from the provider's prompt cache
    cache_write: int | None = None  # of tokens_in: written to it (Anthropic's cache creation)
    reasoning: int | None = None  # of tokens_out: reasoning ("thinking") tokens
    model: str | None = None  # the model the server says answered (an alias resolved, a router)
    # The reply's output items as the server sent them, for an API whose next turn sends them
    # back (the Responses API: reasoning items must precede the function calls they led to).
    items: list[dict[str, Any]] = field(default_factory=list)
    reasoning_items: int = 0  # of items: reasoning items (the Responses API's)


def count(value: Any) -> int | None:
    """A token count from an API's usage: a whole number ≥ 0, else None (``true`` is not 1,
    a negative or a string is not a count: a broken gateway must not make a figure up)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def text_of(value: Any, what: str) -> str:
    """A text field of a reply (a tool's name, its id, its arguments): absent is empty; any
    other type makes the reply malformed here, before it reaches a step or a sample."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    raise CallFailed("malformed_stream", f"{what} is {type(value).__name__}, not a string")


def usage_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer that is not a reply: its status, headers, and the start of its body."""

    status: int
    headers: Mapping[str, str]
    body: str

    def message(self, redact: Callable[[str], str]) -> str:
        """``HTTP 503: <the body's start>``, its secrets masked before it is cut (a cut
        first would leave a key's first characters)."""
        body = redact(" ".join(self.body[: EXCERPT * 8].split()))[:EXCERPT]
        return f"HTTP {self.status}: {body}" if body else f"HTTP {self.status}"


class ChatApi(Protocol):
    """One provider's wire format. Pure except ``receive``, which reads the response body."""

    name: str
    model: str

    def opening(self, case: Case) -> Messages: ...

    def request(self, case: Case, messages: Messages, stream: bool) -> tuple[str, dict[str, Any]]:
        """The path (relative to the base URL) and JSON body of the next call."""
        ...

    def headers(self, key: str | None) -> dict[str, str]: ...

    async def receive(self, response: Response, call: ModelCall, stream: bool) -> ModelReply:
        """Read the body, marking each token-bearing chunk on ``call`` as it arrives."""
        ...

    def extend(
        self, messages: Messages, reply: ModelReply, results: list[tuple[ToolCall, str]]
    ) -> None:
        """Append the model's turn and the tool results to the conversation."""
        ...


def json_object(data: str | bytes) -> dict[str, Any]:
    """A JSON object from a chunk or body, or a ``malformed_stream`` error quoting it."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CallFailed("malformed_stream", f"not JSON: {str(data)[:120]!r}") from exc
    if not isinstance(doc, dict):
        raise CallFailed("malformed_stream", f"not a JSON object: {str(data)[:120]!r}")
    return doc


def check_suite(api: object, suite: Suite) -> None:
    """Let a model API refuse, before the run, the cases it cannot carry: one that defines
    ``refuse(case)`` raises a TargetError naming the case (legacy completions: tools)."""
    refuse: Callable[[Case], None] | None = getattr(api, "refuse", None)
    if refuse is None:
        return
    for case in suite.checked():
        refuse(case)


def exact_output(body: dict[str, Any], case: Case, extras: bool, cap: str = "max_tokens") -> None:
    """Ask for exactly the case's ``output_tokens`` (a synthetic workload's output length):
    ``max_tokens`` caps it, and, where the server takes them (vLLM, SGLang, the mock: a
    ``--base-url`` that is not a hosted provider's), ``min_tokens`` and ``ignore_eos`` stop it
    ending sooner. Hosted APIs refuse unknown fields with a 400, so they get only the cap.
    ``cap``: the API's name for it (the Responses API's is ``max_output_tokens``)."""
    if case.output_tokens is None:
        return
    body[cap] = case.output_tokens
    if extras:
        body["min_tokens"] = case.output_tokens
        body["ignore_eos"] = True


def openai_stream(body: dict[str, Any], stream: bool) -> None:
    """Ask an OpenAI-style API (Chat Completions, legacy completions) to stream, with usage in
    a last chunk."""
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}


def bearer(key: str | None) -> dict[str, str]:
    """OpenAI-style authentication: the key as a bearer token, none without a key."""
    return {"authorization": f"Bearer {key}"} if key else {}
