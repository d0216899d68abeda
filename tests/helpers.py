"""Helpers the tests import: the example cases, a fixed-timing profile, the CLI in a child
process, a mock server in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from perfbench.mock.profile import Profile
from perfbench.mock.server import command

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
