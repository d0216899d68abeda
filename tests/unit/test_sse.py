"""The SSE parser (``sse.Parser``, ``sse.read``), for any chunking the network produces."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest

from perfbench.apis import sse
from perfbench.apis.sse import Event

pytestmark = pytest.mark.anyio

BODY = 'data: {"a": "é"}\n\n: comment\ndata: x\ndata: y\n\nevent: ping\ndata:z\n\ndata: [DONE]\n\n'
EVENTS = [
    Event("message", '{"a": "é"}'),
    Event("message", "x\ny"),
    Event("ping", "z"),
    Event("message", "[DONE]"),
]


def parse(parts: list[bytes]) -> list[Event]:
    parser = sse.Parser()
    events = [event for part in parts for event in parser.feed(part)]
    return events + parser.close()


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_every_chunking_and_line_ending_gives_the_same_events(newline: str, size: int) -> None:
    body = BODY.replace("\n", newline).encode()
    parts = [body[i : i + size] for i in range(0, len(body), size)]  # splits é and CRLF too
    assert parse(parts) == EVENTS


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_line_endings_may_change_from_chunk_to_chunk(size: int) -> None:
    # A chunk without CR takes the LF-only fast path, the next one the general path: a line
    # or an event left open by one is finished by the other.
    body = b"data: a\r\ndata: b\n\nevent: e\r\ndata: c\r\rdata: d\n\r\n"
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    assert parse(parts) == [Event("message", "a\nb"), Event("e", "c"), Event("message", "d")]


def test_an_event_is_given_by_the_chunk_that_completes_it() -> None:
    parser = sse.Parser()
    assert parser.feed(b"data: 1\n") == []
    assert parser.feed(b"\ndata: 2") == [Event("message", "1")]
    assert parser.feed(b"\n\n") == [Event("message", "2")]


def test_a_line_ends_as_soon_as_its_cr_arrives() -> None:
    """A CR-only server's event must not wait for the next chunk (it may be seconds away)."""
    parser = sse.Parser()
    assert parser.feed(b"data: 1\r") == []
    assert parser.feed(b"\r") == [Event("message", "1")]  # a second CR: the blank line


def test_a_lf_after_a_chunk_ending_in_cr_completes_a_crlf_not_a_blank_line() -> None:
    parser = sse.Parser()
    assert parser.feed(b"data: 1\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r\n") == [Event("message", "1")]


def test_an_event_open_at_the_end_is_dispatched() -> None:
    assert parse([b"data: a\ndata: b"]) == [Event("message", "a\nb")]


def test_empty_chunks_change_nothing() -> None:
    assert parse([b"", b"data: a\r", b"", b"\ndata: b\n", b"", b"\n"]) == [Event("message", "a\nb")]


class _Body:
    """A response whose chunks are given one by one, recording what the reader did."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts, self.log, self.closed = parts, list[str](), False

    @property
    def status_code(self) -> int:
        return 200

    @property
    def headers(self) -> Mapping[str, str]:
        return {"content-type": "text/event-stream"}

    async def aread(self) -> bytes:
        return b"".join(self.parts)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            for part in self.parts:
                self.log.append("chunk")
                yield part
        finally:
            self.closed = True


async def test_read_marks_each_chunk_before_its_events() -> None:
    body = _Body([b"data: 1\n\ndata: 2\n\n", b"", b"data: 3\n\n"])
    await sse.read(body, lambda at: body.log.append("arrived"), lambda e: body.log.append(e.data))
    assert body.log == ["chunk", "arrived", "1", "2", "chunk", "chunk", "arrived", "3"]


async def test_read_closes_the_body_when_an_event_is_rejected() -> None:
    body = _Body([b"data: bad\n\n", b"data: never read\n\n"])

    def reject(event: Event) -> None:
        raise ValueError(event.data)

    with pytest.raises(ValueError, match="bad"):
        await sse.read(body, lambda at: None, reject)
    assert body.closed and body.log == ["chunk"]


def test_a_long_line_in_many_chunks_is_joined_once_not_at_every_chunk() -> None:
    """Joining the open line with each new chunk made a 32 MiB line cost 16.7 s of CPU
    (quadratic); the chunks are held and joined when the line ends."""
    parser = sse.Parser()
    assert parser.feed(b"data: ") == []
    for _ in range(1000):
        assert parser.feed(b"x" * 100) == []
    assert parser._pending == b"data: "  # not grown (copied) at every chunk
    assert parser.feed(b"\n\n") == [Event("message", "x" * 100_000)]


@pytest.mark.parametrize("chunk", [2**16, 2**20])
def test_a_line_past_the_limit_is_too_large(chunk: int) -> None:
    from perfbench.http import CallFailed
    from perfbench.http.limits import MAX_LINE

    parser = sse.Parser()
    parser.feed(b"data: ")
    with pytest.raises(CallFailed) as raised:
        for _ in range(MAX_LINE // chunk + 2):
            parser.feed(b"y" * chunk)
    assert raised.value.kind == "too_large"
    parser = sse.Parser()
    with pytest.raises(CallFailed):  # in one chunk, too
        parser.feed(b"data: " + b"z" * (MAX_LINE + 1))
