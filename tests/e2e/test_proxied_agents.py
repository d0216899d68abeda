"""`--proxy` (issue 24): python: and http+agent targets whose model calls go through
perfbench's proxy, each task handed its own route (a function's `proxy` argument, an HTTP
agent's request field `proxy`). Their samples show exactly the model calls the agent made
(counted by the mock upstream), with tokens and TTFT, and model time + agent time = the
task's latency, as a cmd: target's do. An agent that ignores its route, or calls it with the
wrong key, is a classified failure; one that cannot take a route is refused before the run.
Loopback only, bounded in tasks and time."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    CASES,
    cli,
    covered,
    mock_model_calls,
    mock_process,
    served,
    write_suite,
)
from tests.helpers import run_samples as samples

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
ENV = {**os.environ, "PYTHONPATH": str(AGENTS)}


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process("default") as url:
        yield url


def run(out: Path, target: str, *args: str, cases: Path = CASES / "answer.yaml") -> Any:
    return cli("run", str(cases), "-t", target, "--proxy", "--runs", "1", "--warmup", "0",
               "-q", "--out", str(out), *args, env=ENV)  # fmt: skip


def check_attributed(found: list[dict[str, Any]], streamed: bool, priced: bool = False) -> None:
    for s in found:
        models = [st for st in s["steps"] if st["kind"] == "model"]
        assert s["model_calls"] == len(models) == 2 and s["tool_calls"] == 1, s
        assert all(st["name"] != "agent" for st in models)  # no envelope step left
        assert all(st["tokens_in"] and st["tokens_out"] for st in models)
        if streamed:
            assert all(st["ttft"] is not None and st["ttft"] > 0 for st in models)
        assert any(st["kind"] == "agent" for st in s["steps"])
        assert covered(s) == pytest.approx(s["latency"], abs=0.002)
        # The embedded mock's calls are priced as its model says; "openai/mock" has no price.
        assert (s["cost"] is not None) is priced


@pytest.mark.parametrize(
    ("function", "upstream", "streamed"),
    [("openai_agent", "openai/mock", False), ("anthropic_agent", "anthropic/mock", True)],
)
def test_a_python_agents_calls_through_its_route_are_its_steps(
    tmp_path: Path, mock_url: str, function: str, upstream: str, streamed: bool
) -> None:
    before = mock_model_calls(mock_url)
    base = f"{mock_url}/v1" if upstream.startswith("openai") else mock_url
    done = run(tmp_path, f"python:routed_agents:{function}", "-c", "4", "--repeat", "2",
               "--upstream", upstream, "--base-url", base)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = samples(tmp_path)
    assert len(found) == 8 and all(s["status"] == "ok" for s in found), found
    # The proxy saw every call the agents made upstream, and no other.
    assert sum(s["model_calls"] for s in found) == mock_model_calls(mock_url) - before
    check_attributed(found, streamed)


def test_an_http_agents_calls_through_the_route_in_its_request_are_its_steps(
    tmp_path: Path,
) -> None:
    with served([sys.executable, str(AGENTS / "http_agent_server.py")]) as url:
        target = "http+agent://" + url.removeprefix("http://") + "/task"
        done = run(tmp_path, target, "-c", "4", "--repeat", "2")  # the embedded mock upstream
    assert done.returncode == 0, done.stderr
    found = samples(tmp_path)
    assert len(found) == 8 and all(s["status"] == "ok" for s in found), found
    check_attributed(found, streamed=False, priced=True)


def test_an_agent_that_ignores_its_route_or_misuses_it_is_classified(tmp_path: Path) -> None:
    run(tmp_path / "a", "python:routed_agents:ignores_route")
    found = samples(tmp_path / "a")
    assert found and {s["error_kind"] for s in found} == {"no_model_call"}
    assert "proxy" in found[0]["error"]  # says what to check
    run(tmp_path / "b", "python:routed_agents:stray_route")
    found = samples(tmp_path / "b")
    # The proxy refused the stranger (401); the agent's SDK raised on it.
    assert found and {s["error_kind"] for s in found} == {"agent_exception:AuthenticationError"}
    assert all(s["model_calls"] == 0 for s in found)


def test_a_proxied_agent_that_times_out_keeps_its_calls_and_its_time(tmp_path: Path) -> None:
    cases = write_suite(tmp_path / "slow.yaml", "cases:\n  - id: hang\n    input: hi\n"
                        "    timeout_s: 2\n")  # fmt: skip
    run(tmp_path / "out", "python:routed_agents:hangs_after_a_call", cases=cases)
    (s,) = samples(tmp_path / "out")
    assert s["status"] == "timeout" and s["model_calls"] == 1, s
    # The function's await is the agent's time, not a model step of its own.
    assert [st["kind"] for st in s["steps"]] == ["agent", "model", "agent"]
    assert covered(s) == pytest.approx(s["latency"], abs=0.002)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("python:routed_agents:takes_no_route", "add a `proxy` parameter"),
        ("http+agent://example.com/task", "cannot reach it"),
        ("mock", "--proxy goes with http+agent and python: targets"),
    ],
)
def test_a_target_that_cannot_take_a_route_is_refused_before_the_run(
    tmp_path: Path, target: str, why: str
) -> None:
    done = run(tmp_path, target)
    assert done.returncode != 0 and why in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
