"""The HTTP clients perfbench could run on asyncio, side by side (issue 26, item 3; in `make
bench`, asserts nothing).

The same short non-streaming exchange, 64 in flight, this process pinned to core 0 and
`perfbench mock serve` at zero latency on core 1, uvloop, the garbage collector off; µs of
client CPU a request (getrusage), each client alternated three times, medians:

  aiohttp's ClientSession    the raw reference of client_cost.py
  perfbench's connections    ``HttpClient.post`` on asyncio (http/h1_backend.py: its own
                             keep-alive connections, aiohttp's parser, the arrival stamps)
  httpx's AsyncClient        httpx on its own transport (httpcore)

Rust-backed clients (rnet, pyreqwest) run their I/O on threads of their own: bytes would be
timed when Python sees them, not when they arrive, so they are not candidates for the
measuring client (docs/architecture.md, "The HTTP client on asyncio").

Usage: python tests/bench/http_clients.py [--quick]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench.client_figures import SERVER, SHORT, run_raw
from tests.bench.client_layers import (
    CONTENT,
    HEADERS,
    IN_FLIGHT,
    PATH,
    alternate,
    pinned,
    raw,
    seam,
    slots,
)
from tests.helpers import mock_process


async def httpx_client(url: str, n: int) -> None:
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(limits=limits) as client:

        async def one() -> None:
            response = await client.post(url + PATH, content=CONTENT, headers=HEADERS)
            response.read()

        await slots(n, one)


CLIENTS: dict[str, Callable[[str, int], Awaitable[None]]] = {
    "aiohttp's ClientSession": raw,  # client_layers.py's L0
    "perfbench's connections": seam,  # its L2: HttpClient.post
    "httpx's AsyncClient": httpx_client,
}


def _on_uvloop(client: Callable[[str, int], Awaitable[None]], url: str) -> Callable[[int], None]:
    return lambda n: run_raw(client(url, n))


def main() -> None:
    n = pinned()
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "short.yaml"
        profile.write_text(SHORT)
        with mock_process(profile, cpus=SERVER) as url:
            costs, _ = alternate(
                {name: _on_uvloop(client, url) for name, client in CLIENTS.items()}, n
            )
    print(f"short requests, {IN_FLIGHT} in flight, µs of client CPU a request (median of 3):")
    base = statistics.median(costs["aiohttp's ClientSession"])
    for name, values in costs.items():
        cost = statistics.median(values)
        each = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:26s} {cost:7.1f}  ({cost / base:.2f}× the session's; {each})")


if __name__ == "__main__":
    main()
