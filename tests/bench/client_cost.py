"""perfbench's own cost per task, beyond the raw client's (issue 26; `make bench`, asserts nothing).

The mock server (`perfbench mock serve`, zero latency) runs in a child process pinned to core 1;
the client under test is this process, pinned to core 0. Each figure is measured against a
minimal raw aiohttp client on uvloop (tests/bench/client_figures.py's) in the same sitting,
the two alternated three times, medians:

1. short non-streaming tasks at 64 in flight, one worker: tasks/s, and client CPU per task
   (this process's user + system time over the run, divided by the requests it made, warmup
   included) for perfbench and for the raw client; their difference is perfbench's own cost;
2. 1,000-token streams at 16 in flight: tokens/s and CPU per stream, the same way; the raw
   client reads each SSE line and decodes each event (stdlib json), as a plain client does.

3. the same short tasks at a fixed rate both clients keep up with (open loop, 4,000 a second,
   constant arrivals, each request its own task): CPU per task, and their difference. At the
   ceiling (1.) a slower client leaves the server idle between its requests, and on loopback
   waking the server is the sender's kernel time (tests/bench/client_layers.py); at one rate
   both wake it alike. It is also the open loop's own path (a task and a deadline per arrival).

`--profile` runs only perfbench's short tasks, under py-spy (`make profile`): it writes the
collapsed stacks to profile.txt (open with speedscope or flamegraph.pl) and prints where the
samples were: by function (self time) and by perfbench module (inclusive).

Usage: python tests/bench/client_cost.py [--quick] [--only short|streams|rate]
       python tests/bench/client_cost.py --profile [--out FILE]
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from perfbench import host
from perfbench.engine.session import Session
from perfbench.load import Rate
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import load_suite
from tests.bench.client_figures import (
    BODY,
    CASE,
    LONG,
    SHORT,
    perfbench_run,
    raw_client,
    raw_short,
    run_raw,
)
from tests.helpers import mock_process

CLIENT, SERVER = {0}, {1}
RAW_BODY = orjson.dumps({**BODY, "stream": False})


def cpu() -> float:
    """This process's CPU seconds (user + system), its threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measured(work: Callable[[], Any]) -> tuple[Any, float]:
    before = cpu()
    result = work()
    return result, cpu() - before


def ours(folder: Path, url: str, in_flight: int, n: int, stream: bool) -> tuple[float, float]:
    """One perfbench run (warmup pass + measured pass of ``n`` tasks each): its measured
    throughput (tasks/s or output tokens/s) and the CPU seconds per task over both passes."""
    summary, spent = measured(
        lambda: perfbench_run(folder, "mock+http", in_flight, n, stream=stream, url=url)
    )
    overall = summary["runs"][0]["overall"]
    rate = overall["output_tokens_per_s"] if stream else overall["throughput"]
    return rate, spent / (2 * n)


async def raw_parsed(url: str, in_flight: int, total: int) -> float:
    """Streamed tokens/s as a plain client gets them: each SSE line read, each event decoded
    (stdlib json) and its content counted; what perfbench's own parse is measured against."""
    tokens = 0

    async def parse(response: aiohttp.ClientResponse, start: float) -> None:
        nonlocal tokens
        async for line in response.content:
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                tokens += 1 if delta.get("content") else 0

    seconds = await raw_client(url, in_flight, total, True, parse)
    return tokens / seconds


def raw(url: str, in_flight: int, n: int, stream: bool) -> tuple[float, float]:
    """The raw client, ``n`` requests: requests/s (or tokens/s, each event parsed) and CPU
    seconds per request."""
    coro = raw_parsed(url, in_flight, n) if stream else raw_short(url, in_flight, n)
    rate, spent = measured(lambda: run_raw(coro))
    return rate, spent / n


RATE = 4000.0  # tasks a second: under either client's ceiling on one core of this VM


def ours_at_rate(folder: Path, url: str, n: int) -> float:
    """CPU seconds per task of one perfbench run of ``n`` tasks at ``RATE`` (open loop)."""
    plan = Plan(runs=1, warmup=0, repeat=n, load=Rate(per_second=RATE))
    spec = RunSpec(target=TargetSpec("mock+http", stream=False), plan=plan,
                   out=str(folder / "runs"))  # fmt: skip
    suite = load_suite([folder / "case.yaml"])
    session = Session(spec, suite=suite, server_url=url)
    result, spent = measured(lambda: anyio.run(session.run, backend_options=host.loop_options()))
    assert result.summary["runs"][0]["overall"]["ok"] == n, "a task failed: the figure is void"
    return spent / n


async def raw_at_rate(url: str, n: int) -> None:
    """The raw client at ``RATE``: each request its own task, started on schedule."""
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> None:
            headers = {"content-type": "application/json"}
            url_path = url + "/v1/chat/completions"
            async with session.post(url_path, data=RAW_BODY, headers=headers) as response:
                await response.read()

        start = loop.time()
        async with anyio.create_task_group() as tg:
            for i in range(n):
                delay = start + i / RATE - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                tg.start_soon(one)


def at_rate(folder: Path, n: int) -> None:
    (folder / "profile.yaml").write_text(SHORT)
    mine: list[float] = []
    theirs: list[float] = []
    with mock_process(folder / "profile.yaml", cpus=SERVER) as url:
        run_raw(raw_short(url, 8, 200))
        for _ in range(3):
            mine.append(ours_at_rate(folder, url, n))
            theirs.append(measured(lambda: run_raw(raw_at_rate(url, n)))[1] / n)
    cost, base = (statistics.median(v) * 1e6 for v in (mine, theirs))
    print(
        f"short, {RATE:,.0f} a second (open loop): perfbench {cost:.1f} µs CPU a task "
        f"({', '.join(f'{v * 1e6:.1f}' for v in mine)}); raw aiohttp on uvloop {base:.1f} µs "
        f"({', '.join(f'{v * 1e6:.1f}' for v in theirs)}); perfbench's own cost "
        f"{cost - base:.1f} µs a task"
    )


def compare(folder: Path, profile: str, in_flight: int, n: int, stream: bool, what: str) -> None:
    (folder / "profile.yaml").write_text(profile)
    mine: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    with mock_process(folder / "profile.yaml", cpus=SERVER) as url:
        run_raw(raw_short(url, 8, 200))  # connections and code warm before the first figure
        for _ in range(3):
            mine.append(ours(folder, url, in_flight, n, stream))
            theirs.append(raw(url, in_flight, n, stream))
    rate, base = (statistics.median(v[0] for v in s) for s in (mine, theirs))
    cost, base_cost = (statistics.median(v[1] for v in s) * 1e6 for s in (mine, theirs))
    unit = "tokens/s" if stream else "tasks/s"
    print(
        f"{what}: perfbench {rate:,.0f} {unit} ({_each(mine, 0)}), {cost:.1f} µs CPU a task "
        f"({_each(mine, 1, 1e6)}); raw aiohttp on uvloop {base:,.0f} ({_each(theirs, 0)}), "
        f"{base_cost:.1f} µs ({_each(theirs, 1, 1e6)}); ratio {rate / base:.2f}; perfbench's "
        f"own cost {cost - base_cost:.1f} µs a task"
    )


def _each(values: list[tuple[float, float]], i: int, scale: float = 1.0) -> str:
    return ", ".join(f"{v[i] * scale:,.1f}" if scale != 1.0 else f"{v[i]:,.0f}" for v in values)


def profile(folder: Path, n: int, out: Path) -> None:
    """py-spy over one perfbench run of short tasks (this script again, ``--perfbench-only``)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        sys.exit("py-spy is not installed: pip install py-spy (make profile installs it)")
    cmd = [spy, "record", "--rate", "500", "--format", "raw", "--output", str(out), "--",
           sys.executable, __file__, "--perfbench-only", str(n)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    summarise(out)


def perfbench_only(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "case.yaml").write_text(CASE)
        (folder / "short.yaml").write_text(SHORT)
        with mock_process(folder / "short.yaml", cpus=SERVER) as url:
            rate, per_task = ours(folder, url, 64, n, stream=False)
    print(f"profiled: {rate:,.0f} tasks/s, {per_task * 1e6:.1f} µs CPU a task (under py-spy)")


def summarise(path: Path, top: int = 25) -> None:
    """Self time per function and inclusive time per perfbench module, from collapsed stacks
    (``frame;frame;... count`` lines; py-spy's frames are ``function (file:line)``)."""
    own: collections.Counter[str] = collections.Counter()
    modules: collections.Counter[str] = collections.Counter()
    owners: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        total += int(count)
        own[_frame(frames[-1])] += int(count)
        for module in {_module(f) for f in frames if "perfbench/" in f}:
            modules[module] += int(count)
        owners[_owner(frames)] += int(count)
    print(f"{total:,} samples")
    print("by owner (the innermost perfbench or aiohttp frame: what the sample was spent for):")
    for name, count in owners.most_common(top):
        print(f"  {100 * count / total:5.1f} %  {name}")
    print("self time, by function:")
    for name, count in own.most_common(top):
        print(f"  {100 * count / total:5.1f} %  {name}")
    print("inclusive time, by perfbench module:")
    for name, count in modules.most_common(top):
        print(f"  {100 * count / total:5.1f} %  {name}")


def _owner(frames: list[str]) -> str:
    """aiohttp (the HTTP exchange, what the raw client pays too), the perfbench function whose
    own work it was (anyio, contextlib, orjson… called from it included), or the event loop."""
    for frame in reversed(frames):
        if "/aiohttp/" in frame or "(aiohttp/" in frame:
            return "aiohttp"
        if "perfbench/" in frame:
            return _frame(frame)
    return "event loop, start-up and the rest"


def _frame(frame: str) -> str:
    name, _, where = frame.partition(" (")
    file = where.split(":")[0]
    return f"{name} ({'/'.join(Path(file).parts[-2:])})"


def _module(frame: str) -> str:
    file = frame.partition(" (")[2].split(":")[0]
    return "perfbench/" + file.split("perfbench/", 1)[1]


def main() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two cores: the client on one, the mock server on the other")
    if "--profile" in sys.argv:  # before pinning: the profiled child pins itself
        out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else None
        with tempfile.TemporaryDirectory() as tmp:
            profile(Path(tmp), 20000, out or Path("profile.txt"))
        return
    os.sched_setaffinity(0, CLIENT)
    quick = "--quick" in sys.argv
    if "--perfbench-only" in sys.argv:
        perfbench_only(int(sys.argv[sys.argv.index("--perfbench-only") + 1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "case.yaml").write_text(CASE)
        only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
        if only in (None, "short"):
            compare(folder, SHORT, 64, 6000 if quick else 20000, False, "short, 64 in flight")
        if only in (None, "streams"):
            streams = 300 if quick else 1000
            compare(folder, LONG, 16, streams, True, "1,000-token streams, 16 in flight")
        if only in (None, "rate"):
            at_rate(folder, 8000 if quick else 20000)


if __name__ == "__main__":
    main()
