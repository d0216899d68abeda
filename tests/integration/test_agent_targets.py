"""The HTTP agent and Python callable targets through the runner, under virtual time: the agent
is mocked with respx (HTTP) or defined here (Python), so every latency comes out exact."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

from perfbench.engine.runner import Runner
from perfbench.errors import TargetError
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Recorder
from perfbench.suite import Case, Suite, load_suite
from perfbench.targets.agent_result import AgentMapping, MalformedResult, parse_agent_result
from perfbench.targets.http_agent import HttpAgent
from perfbench.targets.python_callable import PythonCallable, load_callable
from tests.helpers import write_suite

pytestmark = pytest.mark.anyio

URL = "http://agent.test/run"
SECRET = "sk-live-0123456789abcdef"
SUITE = """
cases:
  - id: louvre
    language: en
    system: Be brief.
    input: Where is the Louvre?
    tools:
      - name: search
        description: Web search
      - name: fetch
    expect: {tool_calls: [search, fetch], output_contains: [PARIS]}
"""
CHAT = """
cases:
  - id: chat
    language: en
    messages:
      - {role: user, content: Hi}
      - {role: assistant, content: Hello}
      - {role: user, content: Bye}
    timeout_s: 1.0
"""


def suite_of(tmp_path: Path, text: str = SUITE) -> Suite:
    return load_suite([write_suite(tmp_path / "s.yaml", text)])


async def measure(target: Any, suite: Suite) -> Sample:
    """Run the one case of ``suite`` once through the runner; its sample."""
    samples: list[Sample] = []
    summarizer = Summarizer({c.id: c.timeout_s for c in suite.cases})
    recorder = Recorder(summarizer, observers=[samples.append])
    await Runner(suite, target, Plan(runs=1, warmup=0), recorder).run()
    assert len(samples) == 1
    # Every sample must survive its own JSON round trip (the samples.jsonl line).
    assert Sample.from_json(json.loads(json.dumps(samples[0].to_json()))) == samples[0]
    return samples[0]


def answer(delay: float, response: httpx.Response) -> Any:
    async def effect(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(delay)
        return response

    return effect


@pytest.fixture
async def agent() -> AsyncIterator[HttpAgent]:
    target = HttpAgent(URL, headers={"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET})
    yield target
    await target.aclose()


# --- HTTP agent: success and expectations --------------------------------------------------


async def test_success_with_usage_and_tool_calls(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    body = {
        "output": "It is in Paris.",
        "tool_calls": ["search", {"name": "fetch", "arguments": {}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30},
    }
    route = respx_mock.post(URL).mock(side_effect=answer(0.25, httpx.Response(200, json=body)))
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.expect_ok, s.http_status, s.error_kind) == ("ok", True, 200, None)
    assert s.latency == pytest.approx(0.250, abs=1e-9)
    # A JSON answer shows no first token: neither TTFT nor TTFO is invented.
    assert (s.ttft, s.ttfo, s.itl_mean) == (None, None, None)
    assert (s.tokens_in, s.tokens_out, s.tokens_estimated) == (120, 30, False)
    assert (s.model_calls, s.tool_calls) == (1, 2)
    [step] = s.steps
    assert (step.kind, step.name, step.status) == ("model", "agent", "ok")
    assert step.duration == pytest.approx(0.250, abs=1e-9)
    assert (step.ttft, step.tokens_in, step.tokens_out) == (None, 120, 30)
    sent = route.calls.last.request
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert json.loads(sent.content) == {
        "id": "louvre",
        "input": "Where is the Louvre?",
        "messages": None,
        "system": "Be brief.",
        "language": "en",
        "tools": [
            {
                "name": "search",
                "description": "Web search",
                "parameters": {"type": "object", "properties": {}},
            },
            {
                "name": "fetch",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        ],
        "max_steps": 8,
        "metadata": {"phase": "measured", "run": 0, "iteration": 0},
    }


async def test_messages_case_is_sent_as_messages(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(URL).respond(json={"output": "bye"})
    s = await measure(agent, suite_of(tmp_path, CHAT))
    assert (s.status, s.expect_ok, s.tokens_in, s.tool_calls) == ("ok", None, None, 0)
    sent = json.loads(route.calls.last.request.content)
    assert sent["input"] is None and sent["tools"] == []
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize(
    ("output", "tools", "expect_ok"),
    [
        ("paris, France", ["search", "fetch"], True),  # output_contains is case-insensitive
        ("Paris", ["fetch", "search"], False),  # the order of tool calls matters
        ("Paris", ["search"], False),
        ("Lyon", ["search", "fetch"], False),  # output_contains fails alone
    ],
)
async def test_expectations(
    tmp_path: Path,
    agent: HttpAgent,
    respx_mock: respx.MockRouter,
    output: str,
    tools: list[str],
    expect_ok: bool,
) -> None:
    respx_mock.post(URL).respond(json={"output": output, "tool_calls": tools})
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.expect_ok) == ("ok", expect_ok)


async def test_custom_mapping(tmp_path: Path, respx_mock: respx.MockRouter) -> None:
    mapping = AgentMapping(
        output="choices.0.message.content",
        tool_calls="trace.tools",
        usage="meta.usage",
        steps=None,  # the agent's `steps` field means something else: ignored
    )
    body = {
        "choices": [{"message": {"content": "PARIS"}}],
        "trace": {"tools": [{"name": "search"}, {"name": "fetch"}]},
        "meta": {"usage": {"input_tokens": 7, "output_tokens": 3}},
        "steps": "not ours",
    }
    respx_mock.post(URL).mock(side_effect=answer(0.1, httpx.Response(200, json=body)))
    target = HttpAgent(URL, mapping=mapping)
    try:
        s = await measure(target, suite_of(tmp_path))
    finally:
        await target.aclose()
    assert (s.status, s.expect_ok, s.tokens_in, s.tokens_out) == ("ok", True, 7, 3)
    assert s.latency == pytest.approx(0.100, abs=1e-9)


def test_a_mapping_path_must_be_dotted() -> None:
    with pytest.raises(TargetError, match=re.escape("'output': 'result..text'")):
        AgentMapping(output="result..text")


async def test_reported_steps_are_appended_after_the_agent_step(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    body = {
        "output": "Paris",
        "steps": [
            {"kind": "model", "name": "plan", "duration_s": 0.1, "ttft_s": 0.04, "tokens_in": 100},
            {"kind": "tool", "name": "search", "duration_s": 0.05},
            {"kind": "tool", "name": "fetch", "duration_s": 0.02, "status": "error"},
            {"kind": "model", "duration_s": 0.06, "tokens_in": 150, "tokens_out": 20},
        ],
    }
    respx_mock.post(URL).mock(side_effect=answer(0.25, httpx.Response(200, json=body)))
    s = await measure(agent, suite_of(tmp_path))
    got = [
        (st.kind, st.name, round(st.start, 9), round(st.duration, 9), st.status) for st in s.steps
    ]
    assert got == [
        ("model", "agent", 0.0, 0.25, "ok"),
        ("model", "plan", 0.0, 0.1, "ok"),
        ("tool", "search", 0.1, 0.05, "ok"),
        ("tool", "fetch", 0.15, 0.02, "error"),
        ("model", "model", 0.17, 0.06, "ok"),
    ]
    assert s.steps[1].ttft == 0.04
    # The agent's own TTFT is not presented as measured: the task's TTFT stays unknown.
    assert s.ttft is None
    # No `tool_calls` field: the reported tool steps say which tools ran.
    assert (s.status, s.expect_ok) == ("ok", True)
    # The `agent` step encloses the reported ones: counted once, tokens summed once.
    assert (s.model_calls, s.tool_calls, s.tokens_in, s.tokens_out) == (2, 2, 250, 20)


async def test_usage_wins_over_reported_step_tokens(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    body = {
        "output": "Paris",
        "tool_calls": [],
        "steps": [{"kind": "model", "duration_s": 0.1, "tokens_in": 5, "tokens_out": 5}],
        "usage": {"input_tokens": 40, "output_tokens": 9},
    }
    respx_mock.post(URL).respond(json=body)
    s = await measure(agent, suite_of(tmp_path))
    assert (s.model_calls, s.tool_calls, s.tokens_in, s.tokens_out) == (1, 0, 40, 9)
    assert s.expect_ok is False  # tool_calls given (empty) beats the (absent) tool steps


# --- HTTP agent: failures are samples ------------------------------------------------------


async def test_429_is_rate_limited(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(
        side_effect=answer(0.05, httpx.Response(429, json={"error": "slow down"}))
    )
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.error_kind, s.http_status, s.expect_ok) == (
        "rate_limited",
        "rate_limited",
        429,
        None,
    )
    assert "slow down" in (s.error or "")
    assert s.latency == pytest.approx(0.050, abs=1e-9)
    assert s.steps[0].status == "rate_limited"


async def test_500_keeps_a_short_body_excerpt_without_secrets(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    # A debugging agent that echoes the request headers in its error page.
    echo = f"Internal error\n  authorization: Bearer {SECRET}\n x-api-key: {SECRET} " + "x" * 1000
    respx_mock.post(URL).respond(500, text=echo)
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.error_kind, s.http_status) == ("error", "http_500", 500)
    assert s.error is not None and len(s.error) <= len("HTTP 500: ") + 200
    shown = "HTTP 500: Internal error authorization: Bearer *** x-api-key: *** xxx"
    assert s.error.startswith(shown)
    assert SECRET not in json.dumps(s.to_json())


async def test_connect_error(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.error_kind, s.http_status) == ("error", "connect_error", None)
    assert s.error == f"cannot connect to {URL}: [Errno 111] Connection refused"
    assert s.steps[0].status == "error"


async def test_read_timeout_of_the_client(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(side_effect=httpx.ReadTimeout("timed out"))
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.error_kind) == ("timeout", "timeout")


class BrokenBody(httpx.AsyncByteStream):
    """A body that breaks off after its first chunk, as when the agent's process dies."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"output": "Par'
        await anyio.sleep(0.1)
        raise httpx.ReadError("peer closed connection")


async def test_body_broken_off_is_connection_dropped(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(side_effect=answer(0.2, httpx.Response(200, stream=BrokenBody())))
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.error_kind, s.http_status) == ("error", "connection_dropped", 200)
    assert s.latency == pytest.approx(0.300, abs=1e-9)


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(200, text="<html>oops</html>"), "answer is not JSON"),
        (httpx.Response(200, json={"result": "Paris"}), "field 'output' is missing"),
        (httpx.Response(200, json={"output": None}), "field 'output' is missing"),
        (httpx.Response(200, json={"output": 42}), "'output': expected a string, got int"),
        (httpx.Response(200, json=["Paris"]), "field 'output' is missing"),
    ],
)
async def test_malformed_answers(
    tmp_path: Path,
    agent: HttpAgent,
    respx_mock: respx.MockRouter,
    response: httpx.Response,
    message: str,
) -> None:
    respx_mock.post(URL).mock(return_value=response)
    s = await measure(agent, suite_of(tmp_path))
    assert (s.status, s.error_kind, s.http_status) == ("error", "malformed_response", 200)
    assert message in (s.error or "")


async def test_runner_timeout_keeps_the_time_spent(
    tmp_path: Path, agent: HttpAgent, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).mock(side_effect=answer(5.0, httpx.Response(200, json={"output": "x"})))
    s = await measure(agent, suite_of(tmp_path, CHAT))  # timeout_s: 1.0
    assert (s.status, s.error_kind) == ("timeout", "timeout")
    assert s.latency == pytest.approx(1.0, abs=1e-9)
    assert (s.steps[0].status, round(s.steps[0].duration, 9)) == ("cancelled", 1.0)


async def test_no_header_or_url_secret_in_any_sample(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    url = f"https://bob:{SECRET}@agent.test:8443/v1/run?code={SECRET}"
    target = HttpAgent(url, headers={"Authorization": f"Bearer {SECRET}"})
    assert target.name == "http+agent:https://agent.test:8443/v1/run"
    leaky = f"got Bearer {SECRET} and {SECRET}"
    respx_mock.post(url__startswith="https://agent.test:8443/v1/run").mock(
        side_effect=[
            httpx.Response(200, json={"output": "Paris"}),
            httpx.Response(401, text=leaky),
            httpx.Response(429, text=leaky),
            httpx.Response(200, text=leaky),
            httpx.Response(200, json={"output": 1, "usage": {"input_tokens": SECRET}}),
            httpx.ConnectError(leaky),
            httpx.ReadError(leaky),
        ]
    )
    suite = suite_of(tmp_path)
    try:
        samples = [await measure(target, suite) for _ in range(7)]
    finally:
        await target.aclose()
    kinds = [s.error_kind for s in samples]
    assert kinds == [
        None,
        "http_401",
        "rate_limited",
        "malformed_response",
        "malformed_response",
        "connect_error",
        "connection_dropped",
    ]
    for s in samples:
        assert SECRET not in json.dumps(s.to_json())


async def test_a_given_client_is_used_and_not_closed(
    tmp_path: Path, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(URL).respond(json={"output": "Paris"})
    async with httpx.AsyncClient(headers={"x-team": "perf"}) as client:
        target = HttpAgent(URL, client=client, timeout_s=2.0)
        s = await measure(target, suite_of(tmp_path))
        await target.aclose()
        assert not client.is_closed
    assert s.status == "ok"
    assert respx_mock.calls.last.request.headers["x-team"] == "perf"


@pytest.mark.parametrize("url", ["agent.test/run", "ftp://agent.test/run", "http:///run"])
def test_a_bad_url_is_refused_up_front(url: str) -> None:
    with pytest.raises(TargetError, match=r"expected http://host\[:port\]/path"):
        HttpAgent(url)


# --- the shared answer parser --------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"output": "a", "tool_calls": "search"}, "'tool_calls': expected a list, got str"),
        ({"output": "a", "tool_calls": [{"id": 1}]}, "'tool_calls[0]': expected a name"),
        ({"output": "a", "steps": [{"kind": "llm", "duration_s": 1}]}, "'steps[0].kind'"),
        ({"output": "a", "steps": [{"kind": "tool"}]}, "'steps[0].duration_s': missing"),
        ({"output": "a", "steps": [{"kind": "tool", "duration_s": -1}]}, "seconds ≥ 0"),
        ({"output": "a", "steps": [{"kind": "tool", "duration_s": 1, "status": "?"}]}, "status"),
        ({"output": "a", "usage": [1, 2]}, "'usage': expected an object, got list"),
        ({"output": "a", "usage": {"input_tokens": True}}, "'usage.input_tokens'"),
        ({"output": "a", "usage": {"output_tokens": 1.5}}, "'usage.output_tokens'"),
    ],
)
def test_parser_names_the_bad_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(MalformedResult, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_agent_result(doc)


def test_parser_reads_objects_and_openai_usage() -> None:
    @dataclass
    class Usage:
        prompt_tokens: int
        completion_tokens: int

    @dataclass
    class Answer:
        output: str
        usage: Usage

    result = parse_agent_result(Answer("hi", Usage(3, 4)))
    assert (result.output, result.tool_calls, result.tokens_in, result.tokens_out) == (
        "hi",
        (),
        3,
        4,
    )


# --- Python callable -----------------------------------------------------------------------


async def some_agent(case: Case) -> str:
    await anyio.sleep(0.25)
    return f"The {case.id} is in Paris."


async def dict_agent(case: Case) -> dict[str, Any]:
    await anyio.sleep(0.1)
    return {
        "output": "PARIS",
        "tool_calls": [{"name": "search"}, "fetch"],
        "steps": [{"kind": "model", "duration_s": 0.1, "tokens_in": 10, "tokens_out": 2}],
        "usage": {"input_tokens": 11, "output_tokens": 3},
    }


@dataclass
class Answer:
    output: str
    tool_calls: list[str]


class ObjectAgent:
    async def __call__(self, case: Case) -> Answer:
        await anyio.sleep(0.05)
        return Answer("paris", ["search", "fetch"])


object_agent = ObjectAgent()


async def failing_agent(case: Case) -> str:
    await anyio.sleep(0.125)
    raise ValueError("the model said no " + "!" * 1000)


async def shapeless_agent(case: Case) -> dict[str, str]:
    return {"text": "Paris"}


def sync_agent(case: Case) -> str:
    return "Paris"


def lying_wrapper(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(case: Case) -> str:  # claims to be `fn` (async) but returns a plain value
        return "Paris"

    return wrapper


lying_agent = lying_wrapper(some_agent)
NOT_A_FUNCTION = 42


async def test_python_str_result(tmp_path: Path) -> None:
    target = PythonCallable("python:tests.integration.test_agent_targets:some_agent")
    assert target.name == "python:tests.integration.test_agent_targets:some_agent"
    s = await measure(target, suite_of(tmp_path))
    assert (s.status, s.expect_ok) == ("ok", False)  # right output, but no tool calls
    assert s.latency == pytest.approx(0.250, abs=1e-9)
    assert [(st.name, round(st.duration, 9)) for st in s.steps] == [("agent", 0.25)]
    assert (s.ttft, s.tokens_in, s.model_calls, s.tool_calls) == (None, None, 1, 0)


async def test_python_dict_result(tmp_path: Path) -> None:
    target = PythonCallable("tests.integration.test_agent_targets:dict_agent")
    assert target.name == "python:tests.integration.test_agent_targets:dict_agent"
    s = await measure(target, suite_of(tmp_path))
    assert (s.status, s.expect_ok, s.tokens_in, s.tokens_out) == ("ok", True, 11, 3)
    assert [st.name for st in s.steps] == ["agent", "model"]
    assert (s.model_calls, s.http_status) == (1, None)


async def test_python_object_result(tmp_path: Path) -> None:
    s = await measure(
        PythonCallable("tests.integration.test_agent_targets:object_agent"), suite_of(tmp_path)
    )
    assert (s.status, s.expect_ok) == ("ok", True)
    assert s.latency == pytest.approx(0.050, abs=1e-9)


async def test_python_exception_is_an_error_sample(tmp_path: Path) -> None:
    s = await measure(
        PythonCallable("tests.integration.test_agent_targets:failing_agent"), suite_of(tmp_path)
    )
    assert (s.status, s.error_kind) == ("error", "agent_exception:ValueError")
    assert s.error is not None and s.error.startswith("the model said no !") and len(s.error) == 500
    assert s.latency == pytest.approx(0.125, abs=1e-9)
    assert s.steps[0].status == "error"


async def test_python_result_without_output(tmp_path: Path) -> None:
    s = await measure(
        PythonCallable("tests.integration.test_agent_targets:shapeless_agent"), suite_of(tmp_path)
    )
    assert (s.status, s.error_kind) == ("error", "malformed_response")
    assert "field 'output' is missing" in (s.error or "")


async def test_python_wrapper_returning_a_plain_value(tmp_path: Path) -> None:
    s = await measure(
        PythonCallable("tests.integration.test_agent_targets:lying_agent"), suite_of(tmp_path)
    )
    assert (s.status, s.error_kind) == ("error", "agent_not_async")


async def test_python_callable_given_directly(tmp_path: Path) -> None:
    target = PythonCallable("my_agent", fn=functools.partial(some_agent))
    assert target.name == "python:my_agent"
    s = await measure(target, suite_of(tmp_path))
    assert s.status == "ok"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "python:tests.integration.no_such_module:fn",
            "module 'tests.integration.no_such_module' not found",
        ),
        ("tests.integration.test_agent_targets:missing", "has no attribute 'missing'"),
        ("tests.integration.test_agent_targets:sync_agent", "is not async"),
        ("tests.integration.test_agent_targets:NOT_A_FUNCTION", "is a int, not an async function"),
        ("tests.integration.test_agent_targets:Answer", "is a type, not an async function"),
        ("tests.integration.test_agent_targets", "expected 'package.module:function'"),
        ("python::fn", "expected 'package.module:function'"),
    ],
)
def test_load_callable_errors(spec: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        load_callable(spec)


def test_load_callable_accepts_functions_methods_and_callable_objects() -> None:
    # pytest imported this file under another module name, so compare names, not identity.
    module = "tests.integration.test_agent_targets"
    loaded = load_callable(f"python:{module}:some_agent")
    assert (loaded.__module__, loaded.__qualname__) == (module, "some_agent")
    assert type(load_callable(f"{module}:object_agent")).__name__ == "ObjectAgent"
    method = load_callable(f"{module}:ObjectAgent.__call__")
    assert method.__qualname__ == "ObjectAgent.__call__"


@pytest.fixture
def broken_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "broken_agent_mod.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "broken_agent_mod"


def test_a_missing_dependency_is_not_reported_as_a_missing_module(broken_module: str) -> None:
    with pytest.raises(TargetError, match="importing 'broken_agent_mod' failed: No module named"):
        load_callable(f"{broken_module}:run")


async def test_an_http_agent_gets_its_key_and_headers(
    tmp_path: Path, respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--api-key-env` was silently ignored for http+agent (the agent got no Authorization);
    `--header` did not exist."""
    from perfbench.targets.registry import resolve
    from perfbench.targets.target_spec import TargetSpec

    monkeypatch.setenv("AGENT_KEY", "sk-agent-123456")
    monkeypatch.setenv("TEAM_TOKEN", "tok-987654321")
    route = respx_mock.post(URL).respond(json={"output": "Paris"})
    spec = TargetSpec(f"http+agent:{URL.removeprefix('http:')}", api_key_env="AGENT_KEY",
                      headers=("X-Team: perf", "X-Token: t=${TEAM_TOKEN}"))  # fmt: skip
    target = resolve(spec)
    try:
        s = await measure(target, suite_of(tmp_path))
    finally:
        await target.aclose()
    assert s.status == "ok"
    sent = route.calls[0].request.headers
    assert sent["authorization"] == "Bearer sk-agent-123456"
    assert (sent["x-team"], sent["x-token"]) == ("perf", "t=tok-987654321")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"target": "http+agent://a/run", "headers": ("Authorization: Bearer sk-literal",)},
            "carries a credential: give its value as ${VARIABLE}",
        ),
        (
            {"target": "http+agent://a/run", "headers": ("X-Token: ${NOT_SET_ANYWHERE}",)},
            "NOT_SET_ANYWHERE is not set (--header 'X-Token' names it)",
        ),
        (
            {"target": "http+agent://a/run", "headers": ("no colon here",)},
            "write it as 'Name: value'",
        ),
        (
            {"target": "http+agent://a/run", "base_url": "http://x/v1"},
            "--base-url goes with model targets",
        ),
        (
            {"target": "python:os:getcwd", "api_key_env": "HOME"},
            "python: targets make no HTTP requests",
        ),
    ],
)
def test_target_options_that_cannot_apply_are_refused(spec: dict[str, Any], message: str) -> None:
    from perfbench.errors import TargetError
    from perfbench.targets.registry import resolve
    from perfbench.targets.target_spec import TargetSpec

    with pytest.raises(TargetError) as caught:
        resolve(TargetSpec(**spec))
    assert message in str(caught.value)
    assert "sk-literal" not in str(caught.value)


async def test_model_targets_send_extra_headers_and_keep_them_out_of_errors(
    tmp_path: Path, respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfbench.targets.registry import resolve
    from perfbench.targets.target_spec import TargetSpec

    monkeypatch.setenv("GATEWAY_TOKEN", "gw-secret-abcdef")
    base = "http://gw.test/v1"
    echo = f"denied for Bearer gw-secret-abcdef at {base}"
    route = respx_mock.post(f"{base}/chat/completions").respond(403, text=echo)
    spec = TargetSpec("openai/m", base_url=base, retries=0,
                      headers=("Proxy-Authorization: Bearer ${GATEWAY_TOKEN}",))  # fmt: skip
    target = resolve(spec)
    try:
        s = await measure(target, suite_of(tmp_path))
    finally:
        await target.aclose()
    assert route.calls[0].request.headers["proxy-authorization"] == "Bearer gw-secret-abcdef"
    assert s.error_kind == "http_403" and "gw-secret-abcdef" not in (s.error or "")
