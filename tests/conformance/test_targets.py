"""Every target kind, over both HTTP stacks, against the loopback mock: one fault reads the same
wherever it is met (one ``sample.ERROR_KINDS`` vocabulary), and one answer meets a case's
``expect`` the same way (one ``Expect.check``).

The kinds: the in-process mock (no transport), ``mock+http`` (the server in a child process),
``openai/…`` and ``anthropic/…`` with ``--base-url`` (the agent loop over each wire format) and
``http+agent`` (a whole agent behind HTTP, here the mock's chat endpoint read through an
``AgentMapping``). The stacks: asyncio with aiohttp (every real run) and trio with httpx (the
virtual-time tests'). Real sockets and real time: each task lasts milliseconds, the stalled
one a second (the case's timeout)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from perfbench.engine.observer import RunObserver
from perfbench.engine.session import Session
from perfbench.mock.profile import load_profile
from perfbench.mock.server import serve_in_thread
from perfbench.sample import Sample, known_kind
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import Case, Expect, Message, Suite, Tool
from perfbench.targets import Target
from perfbench.targets.http_agent import AgentMapping, HttpAgent

# Under trio, a stream httpx abandons mid-body leaves httpx's own nested generators for trio to
# collect, and it warns (the known limitation xfailed in test_model_clients.py): not what these
# tests are about.
_ABANDONED = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning",
    "ignore:Async generator 'httpx:ResourceWarning",
)
BACKENDS = ("asyncio", pytest.param("trio", marks=_ABANDONED))
FAULTS = ("none", "error_500", "error_503", "reset", "truncate", "malformed", "stall")
# What each fault is, for a target that calls a model (the agent loop) or is the mock itself.
MODEL = {
    "none": ("ok", None),
    "error_500": ("error", "http_500"),
    "error_503": ("error", "http_503"),
    "reset": ("error", "connection_dropped"),
    "truncate": ("error", "malformed_stream"),
    "malformed": ("error", "malformed_stream"),
    "stall": ("timeout", "timeout"),
}
# Anthropic's API calls its overload 529: the mock's error_503 speaks it on that wire.
ANTHROPIC = {**MODEL, "error_503": ("error", "http_529")}
# A whole agent answers in one body: cut short of its Content-Length, the connection broke;
# complete but broken JSON, the answer is malformed.
AGENT = {**MODEL, "truncate": ("error", "connection_dropped"),
         "malformed": ("error", "malformed_response")}  # fmt: skip

SUITE = Suite.of(
    "conformance",
    [
        # messages (not input), so the HTTP agent's request is a chat request the mock takes
        Case(id="plain", language="en", messages=[Message(role="user", content="hi")],
             timeout_s=1.0),
        Case(id="expects", language="en", messages=[Message(role="user", content="hi")],
             timeout_s=1.0, expect=Expect(output_contains=["no-such-words-here"])),
    ],
)  # fmt: skip


class _Samples(RunObserver):
    def __init__(self) -> None:
        self.got: list[Sample] = []

    def sample(self, sample: Sample) -> None:
        self.got.append(sample)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("profiles")
    made = {}
    for fault in FAULTS:
        faults = "" if fault == "none" else f"faults: {{{fault}: 1.0, stall_s: 3}}\n"
        path = made[fault] = folder / f"{fault}.yaml"
        path.write_text(
            "ttft_ms: 5\nitl_ms: 1\noutput_chars: 40\n"
            "models: {sim: {tokens_per_char: {default: 0.25}}}\n" + faults
        )
    return made


@pytest.fixture(scope="module")
def servers(profiles: dict[str, Path]) -> Iterator[dict[str, str]]:
    """One mock server per fault, on its own loop in a thread, for the targets given a URL."""
    with (
        serve_in_thread(load_profile(str(profiles["none"]))) as none,
        serve_in_thread(load_profile(str(profiles["error_500"]))) as e500,
        serve_in_thread(load_profile(str(profiles["error_503"]))) as e503,
        serve_in_thread(load_profile(str(profiles["reset"]))) as reset,
        serve_in_thread(load_profile(str(profiles["truncate"]))) as truncate,
        serve_in_thread(load_profile(str(profiles["malformed"]))) as malformed,
        serve_in_thread(load_profile(str(profiles["stall"]))) as stall,
    ):
        servers = (none, e500, e503, reset, truncate, malformed, stall)
        yield {fault: s.url for fault, s in zip(FAULTS, servers, strict=True)}


def _measure(
    spec: RunSpec, backend: str, target: Target | None = None, suite: Suite = SUITE
) -> dict[str, Sample]:
    watch = _Samples()
    session = Session(spec, watch, suite=suite, target=target)
    anyio.run(session.run, backend=backend)
    return {s.case: s for s in watch.got}


def _spec(target: str, base_url: str | None = None, stream: bool = True) -> RunSpec:
    # No retries: a 5xx is then one request, and the fault the only thing measured.
    return RunSpec(
        target=TargetSpec(target, base_url=base_url, stream=stream, retries=0),
        plan=Plan(runs=1, warmup=0, concurrency=2),
        out=None,
    )


def _check(got: dict[str, Sample], expected: tuple[str, str | None]) -> None:
    for case in ("plain", "expects"):
        s = got[case]
        assert (s.status, s.error_kind) == expected, (case, s.error)
        assert s.error_kind is None or known_kind(s.error_kind)
    if expected[0] == "ok":  # the same expectation check, whichever target answered
        assert got["plain"].expect_ok is None and got["expects"].expect_ok is False


@pytest.mark.parametrize("fault", FAULTS)
def test_the_in_process_mock(profiles: dict[str, Path], fault: str) -> None:
    _check(_measure(_spec(f"mock:{profiles[fault]}"), "trio"), MODEL[fault])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", FAULTS)
def test_the_mock_over_http(profiles: dict[str, Path], fault: str, backend: str) -> None:
    _check(_measure(_spec(f"mock+http:{profiles[fault]}"), backend), MODEL[fault])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", FAULTS)
def test_an_openai_compatible_server(servers: dict[str, str], fault: str, backend: str) -> None:
    _check(_measure(_spec("openai/m", servers[fault] + "/v1"), backend), MODEL[fault])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", FAULTS)
def test_an_anthropic_compatible_server(servers: dict[str, str], fault: str, backend: str) -> None:
    _check(_measure(_spec("anthropic/m", servers[fault]), backend), ANTHROPIC[fault])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", FAULTS)
def test_an_agent_behind_http(servers: dict[str, str], fault: str, backend: str) -> None:
    url = servers[fault] + "/v1/chat/completions"
    agent = HttpAgent(url, mapping=AgentMapping(output="choices.0.message.content", tool_calls=None,
                                                steps=None, usage="usage"))  # fmt: skip
    _check(_measure(_spec(f"http+agent:{url}"), backend, agent), AGENT[fault])


TOOLS = [Tool(name=n, description=n, result="ok", latency_ms=30) for n in ("a", "b", "c")]
PARALLEL = Suite.of(
    "parallel",
    [
        Case(id="at-once", language="en", input="all three", tools=TOOLS, timeout_s=5.0),
        Case(id="in-turn", language="en", input="all three", tools=TOOLS, timeout_s=5.0,
             parallel_tools=False),
    ],
)  # fmt: skip


@pytest.fixture(scope="module")
def parallel_profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    path = tmp_path_factory.mktemp("parallel") / "parallel.yaml"
    path.write_text(
        "ttft_ms: 2\nitl_ms: 0\noutput_chars: 20\nparallel_tool_calls: 3\n"
        "models: {sim: {tokens_per_char: {default: 0.25}}}\n"
    )
    with serve_in_thread(load_profile(str(path))) as server:
        yield path, server.url


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("kind", ["mock", "mock+http", "openai", "anthropic"])
def test_a_turn_of_parallel_tool_calls(
    parallel_profile: tuple[Path, str], kind: str, stream: bool
) -> None:
    """A profile's ``parallel_tool_calls``: one model turn asks for all three tools, and every
    target runs them at once (or in turn when the case says so), each a step of its own."""
    path, url = parallel_profile
    target = {"mock": f"mock:{path}", "mock+http": f"mock+http:{path}",
              "openai": "openai/m", "anthropic": "anthropic/m"}[kind]  # fmt: skip
    base = {"openai": url + "/v1", "anthropic": url}.get(kind)
    spec = RunSpec(
        target=TargetSpec(target, base_url=base, stream=stream, retries=0),
        plan=Plan(runs=1, warmup=0, concurrency=1),
        out=None,
    )
    watch = _Samples()
    anyio.run(Session(spec, watch, suite=PARALLEL, target=None).run, backend="asyncio")
    got = {s.case: s for s in watch.got}
    for case, overlapping in (("at-once", True), ("in-turn", False)):
        s = got[case]
        assert s.status == "ok" and s.tool_calls == 3, (case, s.error)
        models = [st for st in s.steps if st.kind == "model"]
        tools = sorted((st for st in s.steps if st.kind == "tool"), key=lambda st: st.start)
        assert len(models) == 2 and [t.name for t in tools] == ["a", "b", "c"]
        overlap = tools[0].start + tools[0].duration > tools[2].start
        assert overlap is overlapping, case
