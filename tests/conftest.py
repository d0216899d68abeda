"""Shared fixtures (helpers to import are in tests/helpers.py, as httpx keeps tests/common.py).

Async tests run under trio with a virtual clock by default (``MockClock(autojump_threshold=0)``):
sleeps and timeouts take no real time and latencies come out exact. That suits every test that
does no real I/O. Tests with real sockets and processes (the aiohttp path, the mock server, the
CLI in a child process) cannot be virtual: they live in tests/e2e and tests/conformance, run
in real time, and keep each load loop bounded in count and time."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from trio.testing import MockClock

from perfbench.suite import Suite, load_suite
from tests.helpers import CASES


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
