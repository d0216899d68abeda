"""Helpers the tests import: the example cases, a fixed-timing profile, the CLI in a child
process, a mock server in a child process, servers that misbehave on purpose (on loopback)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
from aiohttp import web
from trio.testing import MockClock

from perfbench.engine.session import Session
from perfbench.mock.profile import Profile
from perfbench.mock.server import command
from perfbench.spec import Plan, RunSpec
from perfbench.stats.cost import load_pricer
from perfbench.suite import load_suite
from perfbench.targets.mock import MockAgent

CASES = Path(__file__).resolve().parent.parent / "cases"


def fixed_profile(**overrides: Any) -> Profile:
    """A profile with fixed timings: TTFT 300 ms, 10 ms between tokens, 10-token answers
    (40 characters at 0.25 tokens each), tools at their case latency. A tool call without
    parameters has the arguments `{}`: one token."""
    base: dict[str, Any] = {
        "name": "fixed",
        "ttft_ms": 300,
        "itl_ms": 10,
        "output_chars": 40,
        "models": {"sim": {"tokens_per_char": {"default": 0.25}}},
    }
    return Profile.model_validate({**base, **overrides})


def perfbench(*args: str) -> list[str]:
    """The command line of a `perfbench` child process, in this interpreter."""
    return [sys.executable, "-m", "perfbench", *args]


def start_up() -> float:
    """Seconds a `perfbench` child process takes to start, import its commands and exit, at
    this machine's load now (~0.7 s idle, several at load average 15): the reference a test
    derives a child's deadlines from, rather than a fixed bound an idle machine meets."""
    began = time.monotonic()
    subprocess.run(perfbench("run", "--help"), capture_output=True, timeout=120, check=True)
    return time.monotonic() - began


def cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `perfbench *args` in a child process to its end (bounded), output captured."""
    return subprocess.run(
        perfbench(*args), capture_output=True, text=True, timeout=timeout, env=env
    )


@contextmanager
def run_under_way(
    *args: str, marker: str = "run 2:", timeout: float = 120
) -> Iterator[subprocess.Popen[str]]:
    """`perfbench *args` in a child process (unbuffered), yielded once a line of its stderr
    holds ``marker`` (by default: the second measured pass has started, so the run has
    samples to keep); killed at the end, and after ``timeout`` s whatever happens, so a child
    that never prints it cannot hang the test. The test reads its output (communicate)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        perfbench(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if marker in line:
                break
        yield proc
    finally:
        watchdog.cancel()
        proc.kill()


def write_suite(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@contextmanager
def mock_process(profile: Path | str, *extra: str, cpus: set[int] | None = None) -> Iterator[str]:
    """`perfbench mock serve` in a child process (its own interpreter, so timing is not skewed
    by sharing a GIL with the test); yields the base URL, always stops it. ``cpus`` pins the
    server to those cores (benchmarks keep it off the client's core)."""
    with served(command(str(profile), *extra), cpus) as url:
        yield url


@contextmanager
def served(cmd: list[str], cpus: set[int] | None = None) -> Iterator[str]:
    """A perfbench server (`mock serve`, `proxy`) in a child process: the URL it prints alone
    on its first line; Ctrl-C stops it at the end (killed if it has not stopped in 5 s)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            if cpus:
                os.sched_setaffinity(proc.pid, cpus)
            assert proc.stdout is not None and proc.stderr is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
            yield url
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Raw = Callable[[bytes], Awaitable[bytes]]  # the request's bytes → what to send back, as is


@contextmanager
def in_thread_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own (servers for the code under test)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@contextmanager
def serving(handler: Handler) -> Iterator[str]:
    """``handler`` behind every path, on a loopback port, in a thread of its own."""
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@contextmanager
def serving_raw(answer: Raw) -> Iterator[str]:
    """A loopback server below HTTP: each request's bytes (headers and a Content-Length
    body) go to ``answer``, whose bytes are written back as they are, then the connection
    closes. For replies no HTTP library would send (a bad status line, huge headers)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
            body = await reader.readexactly(length)
            writer.write(await answer(head + body))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    with in_thread_loop() as loop:
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(handle, "127.0.0.1", 0), loop
        ).result(5)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            loop.call_soon_threadsafe(server.close)


MODEL_PATHS = ("/v1/chat/completions", "/v1/messages")


def mock_model_calls(url: str) -> int:
    """The model calls the mock server at ``url`` has answered so far (its GET /stats)."""
    with urllib.request.urlopen(url + "/stats", timeout=5) as reply:
        by_path = orjson.loads(reply.read())["by_path"]
    return sum(by_path.get(path, 0) for path in MODEL_PATHS)


def covered(sample: dict[str, Any]) -> float:
    """A proxied agent's sample: model time (the union of its model calls' intervals) plus
    the agent's own steps, which should add up to its latency."""
    spans = sorted((st["start"], st["start"] + st["duration"]) for st in sample["steps"]
                   if st["kind"] == "model")  # fmt: skip
    union, end = 0.0, float("-inf")
    for start, stop in spans:
        union += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return union + sum(st["duration"] for st in sample["steps"] if st["kind"] == "agent")


def run_samples(out: Path) -> list[dict[str, Any]]:
    """The samples of the one run under ``out``, as the JSON lines of its samples.jsonl."""
    (run_dir,) = [d for d in out.iterdir() if (d / "meta.json").exists()]
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    return [orjson.loads(line) for line in lines]


def load_note() -> str:
    """For a timing assertion's message: how busy the machine was. A timing test compares with
    a reference measured in the same test, or retries; when it still fails, this says whether
    the machine's load (other processes on its cores) is the likely cause."""
    one_minute = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    busy = "loaded: other processes stretched these timings" if one_minute > cores else "idle"
    return f"load average {one_minute:.1f} on {cores} cores ({busy})"


def alive(pid: int) -> bool:
    """Running (a zombie is dead: killed, not yet reaped by its own parent's reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def failing_priced_run(out: Path, plan: Plan) -> Path:
    """A real run of the example cases into ``out`` (in-process mock priced as gpt-4o, one
    model call in five answered 500, trio's virtual clock): samples with failures, costs and
    several steps per task, in no wall time."""
    profile = fixed_profile(
        models={"sim": {"prices_as": "openai/gpt-4o", "tokens_per_char": {"default": 0.25}}},
        faults={"error_500": 0.2},
    )
    session = Session(
        RunSpec(plan=plan, out=str(out)),
        suite=load_suite([CASES]),
        target=MockAgent(profile),
        pricer=load_pricer(None, datetime(2026, 11, 30, 12, tzinfo=UTC)),
    )
    result = anyio.run(
        session.run, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )
    assert result.run_dir is not None and result.meta["status"] == "completed"
    return result.run_dir


def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`perfbench *args` in this process (typer's CliRunner), returned as ``cli`` returns it:
    no child interpreter to start and import perfbench (1 s of CPU a call, and on a loaded
    machine tens of seconds, past ``cli``'s timeout). For what a command does; how the
    process starts, stops on a signal or exits (``main``) is what ``cli`` is for. An exception
    perfbench lets out ends stderr with its traceback, as a child's would."""
    from typer.testing import CliRunner

    from perfbench.cli import app

    result = CliRunner().invoke(app, list(args), env=env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)
