"""Shared fixtures. Async tests run under trio with a virtual clock by default: sleeps and
timeouts take no real time and latencies come out exact."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from trio.testing import MockClock

from perfbench.mock.profile import Profile
from perfbench.mock.server import command
from perfbench.suite import Suite, load_suite

CASES = Path(__file__).resolve().parent.parent / "cases"


@pytest.fixture(autouse=True)
def _collect_garbage(request: pytest.FixtureRequest) -> Iterator[None]:
    """Collect after every end-to-end test (the ones with real sockets), so a socket a test
    leaks warns in that test's teardown, not at random in whichever later test the collector
    happens to run in. Only there: a collection per test costs ~0.2 s with matplotlib loaded."""
    yield
    if "e2e" in request.node.path.parts:
        gc.collect()


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


@pytest.fixture
def example_suite() -> Suite:
    return load_suite([CASES])


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


def cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `perfbench *args` in a child process to its end (bounded), output captured."""
    return subprocess.run(
        perfbench(*args), capture_output=True, text=True, timeout=timeout, env=env
    )


def write_suite(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@contextmanager
def mock_process(profile: Path | str, *extra: str, cpus: set[int] | None = None) -> Iterator[str]:
    """`perfbench mock serve` in a child process (its own interpreter, so timing is not skewed
    by sharing a GIL with the test); yields the base URL, always stops it. ``cpus`` pins the
    server to those cores (benchmarks keep it off the client's core)."""
    cmd = command(str(profile), *extra)
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
