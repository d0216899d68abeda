"""What the provider-specific wire modules share: the error they raise, the frames of a
streamed reply, and fast per-token chunk building."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from perfbench.mock.simulator import ToolSpec


class ApiError(Exception):
    """A request the mock answers with an error status, in the provider's own error shape."""

    def __init__(
        self,
        status: int,
        kind: str | None,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message
        self.param, self.code = param, code
        self.headers = headers or {}


@dataclass
class Frames:
    """A streamed reply: ``head`` goes out with the headers, ``tokens[i]`` when token i is due,
    ``tail`` after the last token. ``malformed`` replaces a token frame to inject that fault."""

    head: list[bytes]
    tokens: list[bytes]
    tail: list[bytes]
    malformed: bytes = b""
    content_type: str = "text/event-stream; charset=utf-8"
    extra: dict[str, str] = field(default_factory=dict)


def text_parts(content: Any) -> str:
    """A message's text: a plain string, or the text of its content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def function_tool(spec: Any, name_param: str, message: str) -> ToolSpec:
    """A function tool's name and parameter schema; a tool without a name is a 400."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ApiError(400, "invalid_request_error", message, param=name_param)
    params = spec.get("parameters")
    return ToolSpec(spec["name"], params if isinstance(params, dict) else {})


def named(name: str, tools: tuple[ToolSpec, ...], param: str) -> str:
    """A tool the request forces by name, which must be one of its tools."""
    if name not in {t.name for t in tools}:
        raise ApiError(
            400,
            "invalid_request_error",
            f"Invalid value for '{param}': no tool named '{name}' in 'tools'.",
            param=param,
        )
    return name


def chunks_of(pieces: list[str], template: bytes, marker: bytes, opening: bytes) -> list[bytes]:
    """One frame per piece, cut from a frame ``template`` that holds an empty string where
    ``marker`` is: the bytes up to ``opening`` + the piece as JSON + the rest. Serialising a
    whole object per token would cost several times more, and tokens are most of a stream."""
    at = template.index(marker)
    prefix = template[: at + len(opening)]
    suffix = template[at + len(marker) :]
    dumps = orjson.dumps
    return [prefix + dumps(p) + suffix for p in pieces]


def retry_headers(seconds: float) -> dict[str, str]:
    """retry-after in whole seconds (what every client reads) and retry-after-ms (what the
    openai and anthropic SDKs prefer), both rounded up so a client that obeys is never early."""
    return {
        "retry-after": str(max(1, math.ceil(seconds))),
        "retry-after-ms": str(max(1, math.ceil(seconds * 1000))),
    }
