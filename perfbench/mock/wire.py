"""What the provider-specific wire modules share: the error they raise, the frames of a
streamed reply, and fast per-token chunk building."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import orjson


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
