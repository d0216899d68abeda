"""Shared fixtures. Async tests run under trio with a virtual clock by default: sleeps and
timeouts take no real time and latencies come out exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trio.testing import MockClock

from perfbench.mock.profile import Profile
from perfbench.suite import Suite, load_suite

CASES = Path(__file__).resolve().parent.parent / "cases"


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


@pytest.fixture
def example_suite() -> Suite:
    return load_suite([CASES])


def fixed_profile(**overrides: Any) -> Profile:
    """A profile with fixed timings: TTFT 300 ms, 10 ms between tokens, 10-token answers,
    5-token tool calls, tools at their case latency."""
    base: dict[str, Any] = {
        "name": "fixed",
        "ttft_ms": 300,
        "itl_ms": 10,
        "output_chars": 40,
        "tool_call_tokens": 5,
        "tokens_per_char": {"default": 0.25},
    }
    return Profile.model_validate({**base, **overrides})


def write_suite(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
