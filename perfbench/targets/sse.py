"""Server-sent events from a response body, as the providers send them.

``lines`` splits the body's bytes at LF, CRLF or CR; ``events`` assembles lines into events per
the SSE spec:
``event:`` names the event, ``data:`` lines join with newlines, ``:`` starts a comment, and a
blank line dispatches. An event still open when the stream ends is dispatched too (some
servers omit the final blank line)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from perfbench.targets.chat import Response


@dataclass(frozen=True, slots=True)
class Event:
    event: str
    data: str


async def events(lines: AsyncIterator[str]) -> AsyncGenerator[Event, None]:
    name = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield Event(name or "message", "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if data:
        yield Event(name or "message", "\n".join(data))


async def lines(chunks: AsyncIterator[bytes]) -> AsyncGenerator[str, None]:
    """The body's lines, without their ends, each given as soon as its end has arrived. A CR
    that ends a chunk ends its line at once (a CR-only server would otherwise be read one
    chunk late); a LF starting the next chunk is then the rest of that CRLF, not a blank line.
    Lines are decoded whole, so a UTF-8 character split between chunks stays intact."""
    pending = b""
    after_cr = False
    async for chunk in chunks:
        if not chunk:  # before the CR check: an empty chunk may come between CR and LF
            continue
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
            if not chunk:
                after_cr = False
                continue
        after_cr = False
        parts = (pending + chunk if pending else chunk).splitlines(keepends=True)
        if parts[-1].endswith((b"\n", b"\r")):
            pending = b""
            after_cr = parts[-1].endswith(b"\r")
        else:
            pending = parts.pop()
        for part in parts:
            yield _strip(part).decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def _strip(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1]


def is_stream(response: Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")
