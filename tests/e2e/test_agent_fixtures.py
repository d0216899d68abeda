"""The test agents in tests/fixtures/agents, run as the command target will run them (input on
stdin, endpoints and keys in the environment) against `perfbench mock serve`: each answers, exits
as it should and makes the number of model calls it claims (counted by the mock's /stats)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import mock_model_calls, mock_process

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process("default") as url:
        yield url


def run(name: str, url: str, **extra: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """The agent's run to its end (60 s at most) and how many model calls it made."""
    env = {
        **os.environ,
        "OPENAI_BASE_URL": url + "/v1",
        "OPENAI_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": url,  # the anthropic SDK appends /v1/messages
        "ANTHROPIC_API_KEY": "test-key",
        **extra,
    }
    before = mock_model_calls(url)
    done = subprocess.run(
        [sys.executable, str(AGENTS / f"{name}.py")],
        input="Where is my order?",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    return done, mock_model_calls(url) - before


@pytest.mark.parametrize(
    ("name", "stream", "calls"),
    [
        ("openai_tool_agent", "1", 2),
        ("openai_tool_agent", "0", 2),
        ("anthropic_tool_agent", "1", 2),
        ("anthropic_tool_agent", "0", 2),
        ("framework_agent", "1", 2),
        ("silent_agent", "1", 0),
    ],
)
def test_agent_answers(mock_url: str, name: str, stream: str, calls: int) -> None:
    done, made = run(name, mock_url, AGENT_STREAM=stream)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert made == calls  # a tool call, its result sent back, the answer


def test_crash_agent_exits_3(mock_url: str) -> None:
    done, made = run("crash_agent", mock_url)
    assert done.returncode == 3
    assert done.stderr.strip()
    assert made == 1


def test_hang_agent_leaves_nothing_when_its_group_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "AGENT_CHILD_PID_FILE": str(pid_file)}
    with subprocess.Popen(
        [sys.executable, str(AGENTS / "hang_agent.py")],
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a group of its own, as the command target will start it
        env=env,
    ) as agent:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline and agent.poll() is None
            time.sleep(0.02)
        child = int(pid_file.read_text())
        assert os.getpgid(child) == agent.pid
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait(5)
    # The orphaned child is reaped by whoever adopted it: dead means gone or a zombie.
    deadline = time.monotonic() + 5
    while True:
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, f"child {child} still running ({state})"
        time.sleep(0.02)
