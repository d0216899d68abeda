"""Legacy OpenAI text completions on the wire (``POST /v1/completions``): request → Turn,
Reply → the ``text_completion`` object or its SSE chunks (``choices[0].text`` per token, the
finish, usage with ``stream_options.include_usage``, ``[DONE]``). What serving benchmarks
(vLLM's, SGLang's, genai-perf) and the ``openai`` SDK's ``client.completions`` send. Pure: no
I/O; errors are OpenAI's (``openai_api.error``).

One prompt per request: a string, or one string or one token array in a list (a token array
counts as that many prompt tokens). A batch of prompts is refused with a 400 rather than
answered with the wrong number of choices."""

from __future__ import annotations

from typing import Any

import orjson

from perfbench.mock.simulator import Reply, Turn
from perfbench.mock.wire import ApiError, Frames, chunks_of

# OpenAI's and vLLM's default for this API when a request says nothing (an explicit null:
# no limit, as vLLM reads it).
DEFAULT_MAX_TOKENS = 16
FINGERPRINT = "fp_perfbench_mock"


def parse(body: Any, key: str, case: str | None) -> Turn:
    """The Turn a request body asks for; ``ApiError`` (400) when it is not a valid request."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request_error", "the body must be a JSON object")
    text, tokens = _prompt(body.get("prompt"))
    limit = body.get("max_tokens", DEFAULT_MAX_TOKENS)
    return Turn(
        model=str(body.get("model") or ""),
        messages=(text,) if text else (),
        max_tokens=_int(limit),
        key=key,
        case=case,
        min_tokens=_int(body.get("min_tokens")),
        ignore_eos=body.get("ignore_eos") is True,
        context_tokens=tokens,  # a prompt given as token ids: already counted
    )


def _prompt(value: Any) -> tuple[str, int]:
    """The prompt's text, or its length in tokens when given as token ids."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]  # one prompt in a list, as the SDK sends a list of one
    if isinstance(value, str) and value:
        return value, 0
    if isinstance(value, list) and value and all(_int(t) is not None for t in value):
        return "", len(value)
    if isinstance(value, list) and len(value) > 1:
        raise ApiError(
            400,
            "invalid_request_error",
            "the mock answers one prompt per request, not a batch of prompts",
            param="prompt",
        )
    raise ApiError(
        400,
        "invalid_request_error",
        "'prompt' must be a non-empty string, or an array of one string or of token ids",
        param="prompt",
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _choice(text: str, finish: str | None) -> dict[str, Any]:
    return {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}


def body(reply: Reply, request_id: str, created: int, model: str) -> bytes:
    """The non-streaming ``text_completion`` object."""
    return orjson.dumps(
        {
            "id": request_id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [_choice(reply.text, reply.finish)],
            "usage": _usage(reply),
            "system_fingerprint": FINGERPRINT,
        }
    )


def stream(reply: Reply, request_id: str, created: int, model: str, usage: bool) -> Frames:
    """SSE frames: one chunk per token, then the finish, usage (when asked), [DONE]. No chunk
    goes with the headers: unlike Chat Completions' role chunk, this API has none."""
    base = {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "system_fingerprint": FINGERPRINT,
    }
    extra = {"usage": None} if usage else {}

    def chunk(text: str, finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [_choice(text, finish)], **extra})

    tokens = chunks_of(reply.pieces, chunk(""), b'"text":""', b'"text":')
    tail = [chunk("", reply.finish)]
    if usage:
        tail.append(_sse({**base, "choices": [], "usage": _usage(reply)}))
    tail.append(b"data: [DONE]\n\n")
    broken = b'data: {"id": "' + request_id.encode() + b'", "choices": [{"text": \n\n'
    return Frames(head=[], tokens=tokens, tail=tail, malformed=broken)


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"
