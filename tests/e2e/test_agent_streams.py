"""A `cmd:` agent's model calls without TTFT: the warning names whose choice it was, from what
the proxy saw of each request (`"stream": true` or not, the step's ``stream``). An agent that
asked for whole replies is told to ask for a stream; one that asked to stream, answered with
one JSON body, is told to check the upstream, never to ask for what it asked."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import invoke, write_suite
from tests.helpers import run_samples as samples
from tests.integration.test_otel import WholeBody

# An agent on the standard library alone (starts fast): one chat call, streamed if argv[1] is 1.
AGENT = """import json, os, sys, urllib.request
body = {"model": "mock", "stream": sys.argv[1] == "1",
        "messages": [{"role": "user", "content": sys.stdin.read()}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions", json.dumps(body).encode(),
    {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
with urllib.request.urlopen(request, timeout=30) as answer:
    answer.read()
print("done")
"""
ONE = "cases:\n  - {id: c, language: en, input: hello, timeout_s: 30}\n"
ASK = "have the agent ask for a stream"
UPSTREAM = "answered with one JSON body: the upstream ignores streaming"


@pytest.fixture
def whole_body() -> Iterator[str]:
    """An OpenAI-compatible upstream that answers one JSON body, stream asked or not."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), WholeBody)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _run(tmp_path: Path, stream: str, *upstream: str) -> tuple[str, list[dict[str, object]]]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    cases = write_suite(tmp_path / "one.yaml", ONE)
    done = invoke("run", str(cases), "-t", f"cmd:{sys.executable} {script} {stream}", *upstream,
                  "--runs", "1", "--warmup", "0", "--repeat", "2", "--out", str(tmp_path / "runs"),
                  "--details", "-q", env={"COLUMNS": "200"})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # --details: every warning in full; the short screen shows the gravest two, and on a busy
    # machine the client's own-pace warnings can come before this one (seen under load).
    steps = [st for s in samples(tmp_path / "runs") for st in s["steps"] if st["kind"] == "model"]
    return " ".join((done.stdout + done.stderr).split()), steps


def test_an_agent_that_asked_for_whole_replies_is_told_to_ask_for_a_stream(
    tmp_path: Path,
) -> None:
    said, steps = _run(tmp_path, "0")
    assert len(steps) == 2 and all(st["stream"] is False for st in steps), steps
    assert "2 of 2 model calls the agent made did not ask to stream" in said and ASK in said
    assert UPSTREAM not in said


def test_an_agent_that_asked_to_stream_is_not_told_to_ask_for_one(
    tmp_path: Path, whole_body: str
) -> None:
    said, steps = _run(tmp_path, "1", "--upstream", "openai/mock", "--base-url", whole_body)
    assert len(steps) == 2 and all(st["stream"] is True for st in steps), steps
    assert all(st["ttft"] is None for st in steps)  # one body: nothing to time a token by
    assert "2 of 2 model calls the agent asked to stream (`stream: true`) were " + UPSTREAM in said
    assert ASK not in said and "ask for" not in said


def test_an_agent_whose_streams_stream_has_no_warning(tmp_path: Path) -> None:
    said, steps = _run(tmp_path, "1")  # the embedded mock streams what is asked
    assert len(steps) == 2 and all(st["stream"] is True and st["ttft"] for st in steps), steps
    assert ASK not in said and UPSTREAM not in said
