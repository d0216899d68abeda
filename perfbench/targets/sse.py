"""Server-sent events from an httpx response, as the providers send them.

Line splitting (LF, CRLF or CR) is httpx's; this assembles lines into events per the SSE spec:
``event:`` names the event, ``data:`` lines join with newlines, ``:`` starts a comment, and a
blank line dispatches. An event still open when the stream ends is dispatched too (some
servers omit the final blank line)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

import httpx


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


def is_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")
