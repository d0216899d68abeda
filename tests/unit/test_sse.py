"""Line splitting of SSE bodies (``sse.lines``), for any chunking the network produces."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from perfbench.targets import sse

pytestmark = pytest.mark.anyio

BODY = 'data: {"a": "é"}\n\n: comment\ndata: x\ndata: y\n\ndata: [DONE]\n\n'
LINES = ['data: {"a": "é"}', "", ": comment", "data: x", "data: y", "", "data: [DONE]", ""]


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _lines(parts: list[bytes]) -> list[str]:
    return [line async for line in sse.lines(_chunks(parts))]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
async def test_every_chunking_and_line_ending_gives_the_same_lines(newline: str, size: int) -> None:
    body = BODY.replace("\n", newline).encode()
    parts = [body[i : i + size] for i in range(0, len(body), size)]  # splits é and CRLF too
    assert await _lines(parts) == LINES


async def test_a_line_is_given_as_soon_as_its_cr_arrives() -> None:
    """A CR-only server's line must not wait for the next chunk (it may be seconds away)."""
    got: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: 1\r"
        assert got == ["data: 1"]  # read before the next chunk is asked for
        yield b"\ndata: 2\r\r"

    async for line in sse.lines(chunks()):
        got.append(line)
    assert got == ["data: 1", "data: 2", ""]


async def test_an_unterminated_last_line_is_kept() -> None:
    assert await _lines([b"data: a\ndata: b"]) == ["data: a", "data: b"]


async def test_empty_chunks_change_nothing() -> None:
    assert await _lines([b"", b"a\r", b"", b"\nb\n", b""]) == ["a", "b"]
