"""How much of a reply perfbench reads: every read is bounded, so a hostile or broken server
(a gzip bomb, a 64 MB error page, a line that never ends) costs a classified failed sample,
not the client's memory, CPU or a timeout that cannot fire.

    MAX_BODY     64 MiB  a whole reply, or a whole stream, decoded (a 1,000-token stream is
                         ~0.2 MiB; a 100,000-token one ~20 MiB)
    MAX_LINE      4 MiB  one line of a server-sent event stream
    MAX_RATIO    1,000   decoded bytes per compressed byte, once MAX_RATIO_FROM is decoded
                         (JSON and SSE compress 5–50×; a bomb 1,000× and more)
    ERROR_READ   64 KiB  what is read of a refused answer's body (its excerpt is 300 chars)

Past a limit the call fails as ``too_large`` (``sample.ERROR_KINDS``), and the connection is
closed rather than read to its end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from perfbench.http.failures import CallFailed

MAX_BODY = 64 * 2**20
MAX_LINE = 4 * 2**20
MAX_RATIO = 1_000
MAX_RATIO_FROM = 2**20
ERROR_READ = 64 * 2**10


def too_large(what: str, limit: int) -> CallFailed:
    return CallFailed("too_large", f"{what} is larger than {_size(limit)}: not read further")


def check_ratio(decoded: int, compressed: int | None) -> None:
    """Raise ``too_large`` when a body decompresses far more than any real reply does."""
    if compressed and decoded >= MAX_RATIO_FROM and decoded > MAX_RATIO * compressed:
        raise CallFailed(
            "too_large",
            f"the body decompresses {decoded // compressed:,}× (over {MAX_RATIO:,}×): "
            "a compression bomb, not read further",
        )


async def read_bounded(
    chunks: AsyncIterator[bytes],
    limit: int,
    compressed: Callable[[], int | None] = lambda: None,
) -> bytes:
    """The body's bytes, up to ``limit`` decoded; past it, or past ``MAX_RATIO``, a
    ``too_large`` failure. ``compressed``: the bytes received so far, before decoding."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large("the body", limit)
        check_ratio(size, compressed())
        parts.append(chunk)
    return b"".join(parts)


async def read_head(chunks: AsyncIterator[bytes], n: int) -> tuple[bytes, bool]:
    """The first ``n`` bytes of a body, and whether the body ended within them."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size >= n:
            return b"".join(parts)[:n], False
    return b"".join(parts), True


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"
