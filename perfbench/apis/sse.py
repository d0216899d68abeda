"""Server-sent events from a response body, as the providers send them.

``Parser`` is incremental and synchronous: ``feed`` takes the body's bytes as they arrive and
returns the events they complete, ``close`` the one left open at the end. Lines end at LF, CRLF
or CR; per the SSE spec, ``event:`` names the event, ``data:`` lines join with newlines, ``:``
starts a comment, and a blank line dispatches. An event still open when the stream ends is
dispatched too (some servers omit the final blank line).

Synchronous because it runs once per chunk on the client's hot path: a chain of async
generators (bytes → lines → events) cost about three times as much CPU per token, and at 64
streams in flight that delay is what a first token waits behind (``make bench``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

from perfbench.http import Response
from perfbench.http.limits import MAX_BODY, MAX_LINE, too_large


class Event(NamedTuple):
    event: str
    data: str


# An Event made without the Python-level ``__new__`` a NamedTuple has: one per token on the
# hot path, where that call was a tenth of the parser's time (``make profile`` on streams).
_event = functools.partial(tuple.__new__, Event)


class Parser:
    __slots__ = ("_after_cr", "_data", "_held", "_held_size", "_name", "_pending")

    def __init__(self) -> None:
        self._pending = b""  # an unterminated line, waiting for its end
        # Chunks of that line that came after it, not joined until the line ends: joining at
        # every chunk made a long line cost quadratic time (32 MiB: 16.7 s of CPU).
        self._held: list[bytes] = []
        self._held_size = 0
        self._after_cr = False  # the last chunk ended in CR: a LF opening the next one ends it
        self._name = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[Event]:
        """The events this chunk completes. A CR ending a chunk ends its line at once (a CR-only
        server would otherwise be read one chunk late); a LF starting the next chunk is then
        the rest of that CRLF, not a blank line. Lines are decoded whole, so a UTF-8 character
        split between chunks stays intact."""
        if not chunk:  # before the CR check: an empty chunk may come between CR and LF
            return []
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
            if not chunk:
                self._after_cr = False
                return []
        self._after_cr = False
        if self._pending:
            if b"\n" not in chunk and b"\r" not in chunk:
                self._hold(chunk)
                return []
            chunk = b"".join((self._pending, *self._held, chunk))
            self._held, self._held_size = [], 0
        if b"\r" not in chunk:
            return self._lf_only(chunk)
        parts = chunk.splitlines(keepends=True)
        last = parts[-1]
        if last.endswith((b"\n", b"\r")):
            self._pending = b""
            self._after_cr = last.endswith(b"\r")
        else:
            self._pending = parts.pop()
            self._check(len(self._pending))
        out: list[Event] = []
        for part in parts:
            end = 2 if part.endswith(b"\r\n") else 1
            self._line(part[:-end].decode("utf-8", "replace"), out)
        return out

    def _lf_only(self, chunk: bytes) -> list[Event]:
        """``feed`` for a chunk without CR, as every provider sends: the same fields, with the
        usual ``data: …`` line and blank line handled inline rather than one call per line
        (``tests/bench/test_stream_path.py`` times this path)."""
        out = self._whole_events(chunk) if not self._data and not self._name else []
        if out:  # the chunk's run of whole events taken at once: the rest, line by line
            chunk = chunk[chunk.rfind(b"\n\n") + 2 :]
            if not chunk:
                self._pending = b""
                return out
        lines = chunk.split(b"\n")
        self._pending = lines.pop()  # b"" when the chunk ends a line
        self._check(len(self._pending))
        data = self._data
        for line in lines:
            if line.startswith(b"data: "):
                data.append(line[6:].decode("utf-8", "replace"))
            elif line:
                self._line(line.decode("utf-8", "replace"), out)
                data = self._data  # a line may have dispatched an event: a fresh list
            elif len(data) == 1 and not self._name:  # the usual event: one data line
                out.append(_event(("message", data.pop())))
            else:
                self._dispatch(out)
                data = self._data
        return out

    @staticmethod
    def _whole_events(chunk: bytes) -> list[Event]:
        """The events of the chunk's start up to its last blank line when each is one
        ``data: …`` line, as providers send tokens (a few dozen to a chunk in a long
        stream): split at once, not line by line (~500 → ~200 ns an event). Else none.
        Each event holds exactly two of the run's LFs, so a run with any other line (a
        second data line, ``event:``, a comment, a stray blank line) is left to the loop."""
        if not chunk.startswith(b"data: "):
            return []
        end = chunk.rfind(b"\n\n")
        if end < 0:
            return []
        events = chunk[6:end].decode("utf-8", "replace").split("\n\ndata: ")
        if chunk.count(b"\n", 0, end + 2) != 2 * len(events):
            return []
        return [_event(("message", data)) for data in events]

    def _hold(self, chunk: bytes) -> None:
        self._held.append(chunk)
        self._held_size += len(chunk)
        self._check(len(self._pending) + self._held_size)

    @staticmethod
    def _check(size: int) -> None:
        if size > MAX_LINE:
            raise too_large("a line of the event stream", MAX_LINE)

    def close(self) -> list[Event]:
        """The event left open when the body ended, if any."""
        out: list[Event] = []
        if self._held:
            self._pending = b"".join((self._pending, *self._held))
            self._held, self._held_size = [], 0
        if self._pending:
            self._line(self._pending.decode("utf-8", "replace"), out)
            self._pending = b""
        self._line("", out)  # the end of the body dispatches, as a blank line would
        return out

    def _dispatch(self, out: list[Event]) -> None:
        """A blank line: the event gathered so far, if it has data, and a fresh one."""
        data = self._data
        if data:
            text = data[0] if len(data) == 1 else "\n".join(data)
            out.append(_event((self._name or "message", text)))
        self._name, self._data = "", []

    def _line(self, line: str, out: list[Event]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            return
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._name = value


async def read(
    response: Response, chunk: Callable[[float | None], None], event: Callable[[Event], None]
) -> None:
    """Read a streamed body to its end: ``chunk`` when bytes arrive (the moment every token in
    them is timed from), then ``event`` for each event they complete. ``chunk`` is given the
    response's ``arrived`` when it has one: when the transport saw those bytes arrive."""
    parser = Parser()
    chunks = response.aiter_bytes()
    size = 0
    try:
        async for data in chunks:
            if not data:
                continue
            size += len(data)
            if size > MAX_BODY:
                raise too_large("the stream", MAX_BODY)
            chunk(getattr(response, "arrived", None))
            for item in parser.feed(data):
                event(item)
        for item in parser.close():
            event(item)
    finally:
        # Close the body's iterator even when an event raised, so no generator is left
        # suspended (httpx's are async generators; aiohttp's iterator has nothing to close).
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def is_stream(response: Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")
