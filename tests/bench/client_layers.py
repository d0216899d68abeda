"""Where perfbench's own cost per short task goes, layer by layer (issue 26; `make bench`, asserts
nothing).

The same short non-streaming exchange (64 in flight, one worker, this process pinned to core 0,
`perfbench mock serve` at zero latency on core 1), each level adding one layer of perfbench on
top of the one before, CPU per task (getrusage over the level's requests):

  L0  a raw aiohttp client on uvloop (client_cost.py's reference)
  L1  perfbench's own connections in place of aiohttp's ClientSession (``H1Backend``): the
        request written by hand, aiohttp's parser, the arrival stamps, the read timeout
  L2  + the transport seam, ``HttpClient.post`` and its response adapter
  L3  + the agent loop: ``ModelAgent.run`` on a ``Task`` (request body, reply parsed, steps,
        the Sample made), slots looping by hand
  L4  + the runner and the statistics: ``Runner`` with a ``Recorder`` and its ``Summarizer``
        (no run directory)
  L5  + the session: samples.jsonl, pricing, the client monitor (client_cost.py's figure)

The levels are alternated three times, medians. The cyclic garbage collector is off in every
level, as the runner keeps it during a pass (engine/collector.py): with it on, L1–L3 would pay
10–15 µs a task in collections the real run does not make. A level's cost is not quite its own:
the slower the client, the more often the server is idle when a request comes, and waking it
is the sender's CPU (the kernel's share of each write grows).

Usage: python tests/bench/client_layers.py [--quick]
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from perfbench import host
from perfbench.engine.runner import Runner
from perfbench.engine.session import Session
from perfbench.http import HttpClient
from perfbench.http.h1_backend import H1Backend
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Recorder
from perfbench.suite import Suite, load_suite
from perfbench.targets import Target, open_target
from perfbench.targets.registry import resolve
from perfbench.targets.target_spec import Sizing
from perfbench.task import Task
from tests.bench.client_cost import CLIENT, SERVER
from tests.bench.client_figures import BODY, CASE, SHORT, run_raw
from tests.helpers import mock_process

IN_FLIGHT = 64
PATH = "/v1/chat/completions"
CONTENT = orjson.dumps({**BODY, "stream": False})
HEADERS = {"content-type": "application/json"}
Levels = dict[str, Callable[[int], None]]


async def slots(n: int, one: Callable[[], Awaitable[None]]) -> None:
    """``IN_FLIGHT`` loops calling ``one`` until ``n`` calls in all."""
    left = n

    async def loop() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    async with anyio.create_task_group() as tg:
        for _ in range(IN_FLIGHT):
            tg.start_soon(loop)


async def raw(url: str, n: int) -> None:
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> None:
            async with session.post(url + PATH, data=CONTENT, headers=HEADERS) as response:
                await response.read()

        await slots(n, one)


async def connections(url: str, n: int) -> None:
    backend = H1Backend(IN_FLIGHT, None)

    def sent() -> None:
        pass

    async def one() -> None:
        async with backend.post(url + PATH, CONTENT, HEADERS, 60.0, sent) as response:
            await response.aread()

    await slots(n, one)
    await backend.aclose()


async def seam(url: str, n: int) -> None:
    client = HttpClient(IN_FLIGHT)
    client.prepare()

    def sent() -> None:
        pass

    async def one() -> None:
        async with client.post(url + PATH, CONTENT, HEADERS, 60.0, sent) as response:
            await response.aread()

    await slots(n, one)
    await client.aclose()


async def opened(url: str, suite: Suite, work: Callable[[Target], Awaitable[None]]) -> None:
    target = resolve(TargetSpec("mock+http", stream=False), Sizing(IN_FLIGHT, 0, url))
    async with AsyncExitStack() as stack:
        await open_target(target, stack)
        await work(target)


async def agent(url: str, n: int, suite: Suite) -> None:
    case = suite.cases[0]
    t0 = time.monotonic()
    made = 0

    async def work(target: Target) -> None:
        async def one() -> None:
            nonlocal made
            made += 1
            task = Task(case, "measured", 0, made, 0, time.monotonic, t0)
            task.begin()
            await target.run(task)

        await slots(n, one)

    await opened(url, suite, work)


async def runner(url: str, n: int, suite: Suite) -> None:
    plan = Plan(runs=1, warmup=0, repeat=n, concurrency=IN_FLIGHT, ramp_up=0)
    recorder = Recorder(Summarizer({c.id: c.timeout_s for c in suite.cases}))

    async def work(target: Target) -> None:
        await Runner(suite, target, plan, recorder).run()

    await opened(url, suite, work)


def whole(folder: Path, url: str, n: int, suite: Suite) -> None:
    plan = Plan(runs=1, warmup=0, repeat=n, concurrency=IN_FLIGHT, ramp_up=0)
    spec = RunSpec(target=TargetSpec("mock+http", stream=False), plan=plan,
                   out=str(folder / "runs"))  # fmt: skip
    anyio.run(Session(spec, suite=suite, server_url=url).run, backend_options=host.loop_options())


def levels(folder: Path, url: str, suite: Suite) -> Levels:
    return {
        "L0 raw aiohttp client": lambda n: run_raw(raw(url, n)),
        "L1 perfbench's connections (H1Backend)": lambda n: run_raw(connections(url, n)),
        "L2 + the transport seam (HttpClient)": lambda n: run_raw(seam(url, n)),
        "L3 + the agent loop (ModelAgent, Task)": lambda n: run_raw(agent(url, n, suite)),
        "L4 + runner and statistics": lambda n: run_raw(runner(url, n, suite)),
        "L5 + the session (samples.jsonl...)": lambda n: whole(folder, url, n, suite),
    }


def pinned() -> int:
    """This process on the client's core, the collector off (as the runner keeps it): the
    requests each step makes (``--quick``: fewer)."""
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two cores: the client on one, the mock server on the other")
    os.sched_setaffinity(0, CLIENT)
    gc.disable()
    return 6000 if "--quick" in sys.argv else 20000


def alternate(steps: Levels, n: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each step run for ``n`` requests, three times round, the first warming up first: µs of
    client CPU a request, and of it the kernel's, per step and round."""
    costs: dict[str, list[float]] = {}
    kernel: dict[str, list[float]] = {}  # of which in the kernel (system time)
    next(iter(steps.values()))(500)  # connections and code warm first
    for _ in range(3):
        for name, step in steps.items():
            before = resource.getrusage(resource.RUSAGE_SELF)
            step(n)
            after = resource.getrusage(resource.RUSAGE_SELF)
            user = after.ru_utime - before.ru_utime
            system = after.ru_stime - before.ru_stime
            costs.setdefault(name, []).append((user + system) / n * 1e6)
            kernel.setdefault(name, []).append(system / n * 1e6)
            gc.collect()  # what the step left, outside the next one's figure
    return costs, kernel


def main() -> None:
    n = pinned()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "case.yaml").write_text(CASE)
        (folder / "short.yaml").write_text(SHORT)
        suite = load_suite([folder / "case.yaml"])
        with mock_process(folder / "short.yaml", cpus=SERVER) as url:
            costs, kernel = alternate(levels(folder, url, suite), n)
    print(f"short tasks, {IN_FLIGHT} in flight, µs of client CPU a task (median of 3; each):")
    base = previous = statistics.median(costs["L0 raw aiohttp client"])
    for name, values in costs.items():
        cost = statistics.median(values)
        each = ", ".join(f"{v:.1f}" for v in values)
        system = statistics.median(kernel[name])
        print(f"  {name:40s} {cost:6.1f}  +{cost - previous:5.1f} on the level before, "
              f"+{cost - base:5.1f} on L0; {system:4.1f} in the kernel  ({each})")  # fmt: skip
        previous = cost


if __name__ == "__main__":
    main()
