"""An agent's model calls through perfbench's proxy (``perfbench.proxy``), timed onto its task.

A ``cmd:`` target always goes through it; ``http+agent`` and ``python:`` targets opt in with
``--proxy``. ``ProxyHost`` is the proxy a target's tasks share: started with the target (and
the embedded mock it forwards to, unless ``--upstream`` names a model target), one route
opened per task. An in-process function cannot be given a per-task environment, and an HTTP
agent serves many tasks at once, so they are handed their task's route: a ``python:``
function as its ``proxy`` keyword argument, an HTTP agent as the request's ``proxy`` field
(``ModelAccess``; docs/agent-targets.md).

``settle`` makes a proxied task's steps (however it ended; ``attributed`` its sample when the
agent answered or failed): the model calls the proxy saw and
``agent`` steps for the rest of the task's time, from its start to the agent's answer, every
moment no model call was in flight (the critical path: overlapping calls count once), so the
model steps' union and the agent steps add up to the task's latency. What the agent reports
of its own steps is not kept then: its model calls would count twice."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

import anyio

from perfbench.http import HttpClient
from perfbench.sample import Sample, Status, Step, status_of
from perfbench.suite import Suite
from perfbench.targets import Target
from perfbench.task import Task

if TYPE_CHECKING:
    from perfbench.apis.recording import Writer
    from perfbench.proxy.routes import Route
    from perfbench.proxy.server import ProxyServer
    from perfbench.proxy.upstream import Upstream
    from perfbench.targets.target_spec import Sizing, TargetSpec


CALLS_GRACE_S = 0.2  # how long a task's sample waits for its calls in flight (Via.calls_done)


@dataclass(frozen=True)
class ModelAccess:
    """Where one task's agent sends its model calls, as the SDKs take them:
    ``AsyncOpenAI(base_url=access.openai_base_url, api_key=access.api_key)``,
    ``AsyncAnthropic(base_url=access.anthropic_base_url, api_key=access.api_key)``. The key is
    the task's token; the upstream's own key stays in the proxy."""

    openai_base_url: str
    anthropic_base_url: str
    api_key: str

    def as_json(self) -> dict[str, str]:
        return {
            "openai_base_url": self.openai_base_url,
            "anthropic_base_url": self.anthropic_base_url,
            "api_key": self.api_key,
        }


@dataclass(frozen=True)
class Via:
    """A task's way through the proxy: its route (where the proxy records its calls), what
    its agent is given, and how the route is closed once the sample is being made."""

    route: Route
    access: ModelAccess
    close: Callable[[], None]

    async def calls_done(self, grace: float = CALLS_GRACE_S) -> None:
        """Wait, at most ``grace`` seconds, for the route's calls in flight to end. An agent
        that failed on what a call sent it can leave before the proxy has read that call's
        fault (the bytes reach the agent before perfbench parses them), and the fault is
        what the task failed of. Only the sample waits: its end is already taken."""
        with anyio.move_on_after(grace):
            await self.route.idle()


class ProxyHost:
    """The proxy a target's tasks call their models through, and what it forwards to."""

    def __init__(self, spec: TargetSpec, sizing: Sizing, upstream: Upstream | None) -> None:
        """``upstream``: where the proxy forwards (None: a mock+http[:profile] upstream,
        started with the proxy, or the one at ``sizing.server_url``)."""
        self.spec, self.sizing, self._upstream = spec, sizing, upstream
        self.server_url = sizing.server_url  # the upstream mock's, once started (workers share)
        self.secrets: tuple[str, ...] = ()
        self.suite: Suite | None = None  # a recording's header names it
        self.simulated = upstream is None
        self._stack = AsyncExitStack()
        self._proxy: ProxyServer | None = None
        self.price_ref: str | None = spec.upstream
        if upstream is None:
            from perfbench.mock.profile import load_profile

            profile, _, model = spec.upstream.removeprefix("mock+http").lstrip(":").partition("@")
            self._profile = profile or "default"
            self.price_ref = load_profile(self._profile).model(model or None)[1].prices_as

    async def start(self) -> None:
        from perfbench.proxy import upstream
        from perfbench.proxy.server import ProxyServer

        where = self._upstream
        if where is None:
            self.server_url = self.server_url or await self._start_mock()
            where = upstream.mock(self.server_url)
        self.secrets = where.secrets
        http = HttpClient(self.sizing.concurrency)
        http.prepare()
        self._stack.push_async_callback(http.aclose)
        self._proxy = ProxyServer(where, http, recording=self._recording(where))
        await self._proxy.start()
        self._stack.push_async_callback(self._proxy.aclose)

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._proxy = None

    def open(self, task: Task) -> Via:
        """The task's route: its calls record onto it until the route is closed."""
        proxy = self._proxy
        if proxy is None:
            from perfbench.errors import TargetError

            raise TargetError("the proxy is used outside its target's context (not started)")
        route = proxy.routes.open(task)
        base = proxy.base_url(route)
        access = ModelAccess(f"{base}/v1", base, route.token)
        return Via(route, access, lambda: proxy.routes.close(route))

    def _recording(self, where: Upstream) -> Writer | None:
        """The recording the run asked for (``--record``), its header naming the suite."""
        if self.spec.record is None:
            return None
        from perfbench.apis.recording import Writer

        suite = self.suite
        header = {
            "suite": suite.name if suite else None,
            "suite_digest": suite.digest if suite else None,
            "upstream": where.name if where.name != "the embedded mock" else self.spec.upstream,
        }
        writer = Writer(Path(self.spec.record), header, where.secrets)
        self._stack.callback(writer.close)
        return writer

    async def _start_mock(self) -> str:
        from perfbench.targets.mock_http import MockHttp

        mock = MockHttp(self._profile, seed=self.sizing.seed)
        await self._stack.enter_async_context(mock)
        assert mock.server_url is not None
        return mock.server_url


class Agent(Protocol):
    """A target that can hand its agent a task's route (``python:``, ``http+agent``)."""

    @property
    def name(self) -> str: ...

    async def run_via(self, task: Task, via: Via | None) -> Sample: ...

    def check(self, suite: Suite) -> None: ...

    async def preflight(self) -> None: ...

    def prepare(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def aclose(self) -> None: ...


class Proxied(Target):
    """``--proxy``: an agent target whose tasks each get a route of one shared proxy."""

    def __init__(self, agent: Agent, host: ProxyHost) -> None:
        self.agent, self.host = agent, host
        self.price_ref, self.simulated = host.price_ref, host.simulated
        self.server_url = host.server_url

    @property
    def name(self) -> str:
        return self.agent.name

    def check(self, suite: Suite) -> None:
        self.agent.check(suite)
        self.host.suite = suite

    async def __aenter__(self) -> Self:
        await self.host.start()
        self.server_url, self.secrets = self.host.server_url, self.host.secrets
        try:
            await self.agent.__aenter__()
        except BaseException:
            await self.host.aclose()
            raise
        return self

    async def preflight(self) -> None:
        await self.agent.preflight()

    def prepare(self) -> None:
        self.agent.prepare()

    async def aclose(self) -> None:
        try:
            await self.agent.aclose()
        finally:
            await self.host.aclose()

    async def run(self, task: Task) -> Sample:
        via = self.host.open(task)
        task.settle = functools.partial(settle, task, via)  # a timeout's sample, too
        try:
            return await self.agent.run_via(task, via)
        finally:
            via.close()


@dataclass(frozen=True)
class Outcome:
    """How a proxied agent's task ended, before the proxy's calls are counted: its answer,
    the tools it says it called (None: the ones the model asked for), or its failure."""

    answer: str = ""
    tool_calls: tuple[str, ...] | None = None
    failure: tuple[Status, str, str] | None = None  # status, error kind, message
    exit_status: int | None = None


def attributed(task: Task, via: Via, end: float, outcome: Outcome, hint: str) -> Sample:
    """A proxied task's sample, its steps settled (``settle``). A recording's miss, or a
    request the proxy refused, is the root cause whatever the agent made of it. An agent
    that failed after a model call failed failed of that call's fault (``http_500``,
    ``malformed_stream``…: one fault reads the same wherever it is met), its own failure in
    the message; one that answered anyway answered (the failed call is a step that says
    so). An answer with no model call through the proxy is ``no_model_call`` (``hint``:
    what to check)."""
    task.settle = None
    settle(task, via, end)
    route = via.route
    models = sum(step.kind == "model" for step in task.steps)
    # Root causes whatever the agent made of them: a recording's miss, and a request the
    # proxy refused (a path outside --base-url: the task did not run as it should).
    misses = [f for f in route.failures if f[0] in ("replay_miss", "proxy_refused")]
    tools = outcome.tool_calls if outcome.tool_calls is not None else tuple(route.tool_calls)
    if misses:
        sample = task.sample("error", error_kind=misses[0][0], error=misses[0][1], end=end)
    elif outcome.failure is not None and route.failures:
        kind, cause = route.failures[0]
        message = f"{cause} (then the agent failed: {outcome.failure[2]})"
        sample = task.sample(status_of(kind), error_kind=kind, error=message, end=end)
    elif outcome.failure is not None:
        status, kind, message = outcome.failure
        sample = task.sample(status, error_kind=kind, error=message, end=end)
    elif models == 0:
        kind, message = route.failures[0] if route.failures else ("no_model_call", hint)
        sample = task.sample("error", error_kind=kind, error=message, end=end)
    else:
        expect_ok = task.case.expect.check(tools, outcome.answer)
        sample = task.sample("ok", expect_ok=expect_ok, end=end)
    sample.exit_status = outcome.exit_status
    sample.tool_calls = len(tools)
    return sample


def settle(task: Task, via: Via, end: float) -> None:
    """A proxied task's steps, final: its route closed (a call still in flight ends,
    cancelled), the target's own ``agent`` step around the whole exchange (an HTTP agent's
    request, a function's await) replaced by the agent's time between the model calls."""
    via.close()
    task.steps[:] = [step for step in task.steps if step.kind != "agent"]
    agent_time(task, end)


def agent_time(task: Task, end: float) -> None:
    """The agent's own time as ``agent`` steps: the gaps, from the task's start to ``end``,
    in the union of its model calls' intervals; then every step in time order."""
    calls = sorted((s.start, s.start + s.duration) for s in task.steps if s.kind == "model")
    gaps: list[Step] = []
    at = task.start
    for start, stop in calls:
        if start > at:
            gaps.append(Step(kind="agent", name="agent", start=at, duration=start - at))
        at = max(at, stop)
    if end > at:
        gaps.append(Step(kind="agent", name="agent", start=at, duration=end - at))
    task.steps.extend(gaps)
    task.steps.sort(key=lambda s: s.start)
