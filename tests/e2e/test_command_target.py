"""`-t "cmd:…"` (issue 24): agents written with the official openai and anthropic SDKs, and
with a real framework (openai-agents), run once per task as programs, their model calls seen
through perfbench's proxy: every sample shows exactly the calls the agent made (counted by
the mock server upstream), with tokens and TTFT, and model time + agent time = the task's
latency. A crashing, a hanging and a model-less agent each become their classified failure,
with no process left behind. All on loopback, bounded in tasks and time."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perfbench.export import load_run
from tests.helpers import (
    CASES,
    alive,
    covered,
    invoke,
    mock_model_calls,
    mock_process,
    write_suite,
)
from tests.helpers import run_samples as samples

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with mock_process("default") as url:
        yield url


def agent(name: str) -> str:
    return f"cmd:{sys.executable} {AGENTS / name}"


def run(out: Path, target: str, *args: str, cases: Path = CASES / "answer.yaml") -> Any:
    return invoke("run", str(cases), "-t", target, "--runs", "1", "--warmup", "0", "-q",
               "--out", str(out), *args)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "upstream"),
    [("openai_tool_agent.py", "openai/mock"), ("anthropic_tool_agent.py", "anthropic/mock"),
     ("framework_agent.py", "openai/mock")],
)  # fmt: skip
def test_every_model_call_of_an_sdk_agent_is_a_step_of_its_task(
    tmp_path: Path, mock_url: str, name: str, upstream: str
) -> None:
    before = mock_model_calls(mock_url)
    base = f"{mock_url}/v1" if upstream.startswith("openai") else mock_url
    done = run(tmp_path, agent(name), "-c", "4", "--repeat", "2", "--upstream", upstream,
               "--base-url", base)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = samples(tmp_path)
    assert len(found) == 8 and all(s["status"] == "ok" for s in found), found
    # The proxy saw every call the agent made upstream, and no other.
    assert sum(s["model_calls"] for s in found) == mock_model_calls(mock_url) - before
    for s in found:
        models = [st for st in s["steps"] if st["kind"] == "model"]
        assert s["model_calls"] == len(models) == 2 and s["tool_calls"] == 1
        assert all(st["tokens_in"] and st["tokens_out"] for st in models)
        # What the proxy saw of each call: the model the agent asked, why the reply ended.
        assert [st["model"] for st in models] == ["mock", "mock"]
        assert models[0]["finish"] in ("tool_calls", "tool_use")  # its tool call
        assert models[1]["finish"] in ("stop", "end_turn")
        if name != "framework_agent.py":  # it does not stream: no TTFT to show
            assert all(st["ttft"] is not None and st["ttft"] > 0 for st in models)
        assert s["exit_status"] == 0
        assert covered(s) == pytest.approx(s["latency"], abs=0.002)


def test_the_default_upstream_is_the_embedded_mock_and_its_calls_are_priced(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, agent("openai_tool_agent.py"), "-c", "2")
    assert done.returncode == 0, done.stderr
    found = samples(tmp_path)
    assert found and all(s["status"] == "ok" and s["model_calls"] == 2 for s in found)
    assert all(s["cost"] is not None for s in found)  # priced as the mock's model says


def test_a_crashing_agent_is_an_agent_exit_with_its_calls_kept(tmp_path: Path) -> None:
    done = run(tmp_path, agent("crash_agent.py"))
    found = samples(tmp_path)
    assert found and all(s["status"] == "error" for s in found), done.stderr
    for s in found:
        assert s["error_kind"] == "agent_exit" and s["exit_status"] == 3
        assert "exit status 3" in s["error"] and s["model_calls"] == 1
    (run_dir,) = [d for d in tmp_path.iterdir() if (d / "meta.json").exists()]
    frame = load_run(run_dir).samples()
    assert list(frame["exit_status"]) == [3] * len(found)  # a column of the samples frame
    assert set(load_run(run_dir).steps()["kind"]) == {"model", "agent"}


def test_an_agent_that_never_calls_a_model_is_classified(tmp_path: Path) -> None:
    run(tmp_path, agent("silent_agent.py"))
    found = samples(tmp_path)
    assert found and {s["error_kind"] for s in found} == {"no_model_call"}


def test_a_hanging_agent_times_out_and_its_process_group_is_killed(tmp_path: Path) -> None:
    cases = write_suite(tmp_path / "slow.yaml", "cases:\n  - id: hang\n    input: hi\n"
                        "    timeout_s: 3\n")  # fmt: skip
    pid_file = tmp_path / "child.pid"
    os.environ["AGENT_CHILD_PID_FILE"] = str(pid_file)
    try:
        done = run(tmp_path / "out", agent("hang_agent.py"), cases=cases)
    finally:
        del os.environ["AGENT_CHILD_PID_FILE"]
    (s,) = samples(tmp_path / "out")
    assert s["status"] == "timeout" and 2.9 < s["latency"] < 10, (s, done.stderr)
    child = int(pid_file.read_text())
    assert not alive(child), "the agent's child outlived its task"


def test_a_program_that_cannot_run_fails_the_run_before_it_starts(tmp_path: Path) -> None:
    done = run(tmp_path, "cmd:no-such-program-here --flag")
    assert done.returncode != 0 and "cmd: cannot run 'no-such-program-here'" in done.stderr
