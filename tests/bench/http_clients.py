"""The HTTP clients perfbench could run on asyncio, side by side (issue 26, item 3; in `make
bench`, asserts nothing).

The same short non-streaming exchange, 64 in flight, this process pinned to core 0 and
`perfbench mock serve` at zero latency on core 1, uvloop, the garbage collector off; µs of
client CPU a request (getrusage), each client alternated three times, medians:

  aiohttp's ClientSession    the raw reference of client_cost.py
  perfbench's connections    ``HttpClient.post`` on asyncio (http/h1_backend.py: its own
                             keep-alive connections, aiohttp's parser, the arrival stamps)
  httpx's AsyncClient        httpx on its own transport (httpcore)

  rnet, pyreqwest            Rust-backed clients on PyPI, when installed in .venv (they are not
                             perfbench's packages): their I/O runs on threads of their own, so
                             bytes would be timed when Python hears of them, not when they
                             arrive; measured for their cost only

Usage: python tests/bench/http_clients.py [--quick]
"""

from __future__ import annotations

import importlib.util
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


async def rnet_client(url: str, n: int) -> None:
    import rnet  # type: ignore[import-not-found]  # not one of perfbench's packages

    client = rnet.Client()

    async def one() -> None:
        response = await client.post(url + PATH, body=CONTENT, headers=HEADERS)
        await response.bytes()

    await slots(n, one)


async def pyreqwest_client(url: str, n: int) -> None:
    from pyreqwest.client import ClientBuilder  # type: ignore[import-not-found]

    async with ClientBuilder().max_connections(IN_FLIGHT).build() as client:

        async def one() -> None:
            request = client.post(url + PATH).body_bytes(CONTENT).headers(HEADERS)
            async with request.build_streamed() as response:
                await response.body_reader.read()

        await slots(n, one)


CLIENTS: dict[str, Callable[[str, int], Awaitable[None]]] = {
    "aiohttp's ClientSession": raw,  # client_layers.py's L0
    "perfbench's connections": seam,  # its L2: HttpClient.post
    "httpx's AsyncClient": httpx_client,
}
# Rust-backed, measured when installed (``pip install rnet pyreqwest`` into .venv)
for _name, _module, _client in (("rnet", "rnet", rnet_client),
                                ("pyreqwest", "pyreqwest", pyreqwest_client)):  # fmt: skip
    if importlib.util.find_spec(_module) is not None:
        CLIENTS[_name] = _client
    else:
        print(f"{_name}: not installed, not measured")


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
