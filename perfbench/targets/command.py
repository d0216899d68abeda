"""``-t "cmd:python my_agent.py --fast"``: any program as the agent, run once per task.

The rest of the target string is the command line, split as a POSIX shell splits words
(``shlex``) but run without a shell. Each task's process gets:

- the case's input on stdin (then stdin closes), and the whole case as JSON in the file named
  by ``PERFBENCH_CASE_FILE`` (``PERFBENCH_CASE_ID`` too);
- ``OPENAI_BASE_URL`` (``…/t/<token>/v1``), ``ANTHROPIC_BASE_URL`` (``…/t/<token>``) and both
  ``*_API_KEY``\\s set to its route of perfbench's proxy (``perfbench.proxy``), which forwards
  every model call to ``--upstream`` and times it onto the task;
- its own process group (session), so that at the case's ``timeout_s`` or on Ctrl-C the
  group is killed, children included, and nothing is left running.

Its stdout (up to ``MAX_OUTPUT``) is the answer, checked against the case's ``expect``. The
sample's steps are the model calls the proxy saw, and ``agent`` steps for the rest of the
task's time: from the task's start to its process's exit, every moment no model call was in
flight (the critical path; overlapping calls count once), so the model steps' union and the
agent steps add up to the task's latency. A status other than 0 (``agent_exit``, with the end
of its stderr), a program that cannot start (``agent_not_started``) and an answer made with no
model call (``no_model_call``) are failed samples."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import tempfile
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Self

import anyio
import orjson
from anyio.abc import Process

from perfbench.errors import TargetError
from perfbench.http import HttpClient
from perfbench.sample import Sample, Step
from perfbench.suite import Suite
from perfbench.targets import Target
from perfbench.task import Task

if TYPE_CHECKING:
    from perfbench.proxy.recording import Writer
    from perfbench.proxy.routes import Route
    from perfbench.proxy.server import ProxyServer
    from perfbench.proxy.upstream import Upstream
    from perfbench.targets.registry import Sizing, TargetSpec

PREFIX = "cmd:"
MAX_OUTPUT = 1 << 20  # an answer's bytes kept; the rest is read and dropped
STDERR_KEPT = 2000  # characters of stderr's end kept for a failed sample's message
_KILL_WAIT = 5.0  # seconds to wait for a killed group's leader to be reaped


class CommandTarget(Target):
    def __init__(
        self, command: str, spec: TargetSpec, sizing: Sizing, upstream: Upstream | None = None
    ) -> None:
        """``upstream``: where the proxy forwards (None: a mock+http[:profile] upstream,
        started when the target is entered, or the one at ``sizing.server_url``)."""
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise TargetError(f"cmd: cannot split the command line {command!r}: {exc}") from None
        if not self.argv:
            raise TargetError('cmd: give the command to run, e.g. -t "cmd:python agent.py"')
        _check_runnable(self.argv[0])
        self.spec, self.sizing, self._upstream = spec, sizing, upstream
        self._name = PREFIX + command
        self._stack = AsyncExitStack()
        self._proxy: ProxyServer | None = None
        self._dir: Path | None = None
        self._suite: Suite | None = None
        self.server_url = sizing.server_url  # the upstream mock's, once started (workers share)
        if upstream is None:
            from perfbench.mock.profile import load_profile

            profile, _, model = spec.upstream.removeprefix("mock+http").lstrip(":").partition("@")
            self._profile = profile or "default"
            self.price_ref = load_profile(self._profile).model(model or None)[1].prices_as
            self.simulated = True
        else:
            self.price_ref = spec.upstream

    @property
    def name(self) -> str:
        return self._name

    def check(self, suite: Suite) -> None:
        self._suite = suite  # a recording's header names it
        for case in suite.cases:
            if case.turns is not None:
                raise TargetError(
                    f"case {case.id} has turns: a cmd: agent gets one input on stdin; run "
                    "multi-turn cases against a model target"
                )

    async def __aenter__(self) -> Self:
        from perfbench.proxy import upstream
        from perfbench.proxy.server import ProxyServer

        where = self._upstream
        if where is None:
            url = self.server_url or await self._start_mock()
            self.server_url = url
            where = upstream.mock(url)
        self.secrets = where.secrets
        http = HttpClient(self.sizing.concurrency)
        http.prepare()
        self._stack.push_async_callback(http.aclose)
        self._proxy = ProxyServer(where, http, recording=self._recording(where))
        await self._proxy.start()
        self._stack.push_async_callback(self._proxy.aclose)
        self._dir = Path(tempfile.mkdtemp(prefix="perfbench-cmd-"))
        self._stack.callback(shutil.rmtree, self._dir, True)
        return self

    def _recording(self, where: Upstream) -> Writer | None:
        """The recording the run asked for (``--record``), its header naming the suite."""
        if self.spec.record is None:
            return None
        from perfbench.proxy.recording import Writer

        suite = self._suite
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

    async def aclose(self) -> None:
        await self._stack.aclose()

    async def run(self, task: Task) -> Sample:
        if self._proxy is None or self._dir is None:
            raise TargetError("cmd: target used outside its context (proxy not started)")
        proxy = self._proxy
        route = proxy.routes.open(task)
        case_file = self._dir / f"{route.token}.json"
        try:
            case_file.write_bytes(orjson.dumps(task.case.model_dump(mode="json")))
            env = _environment(proxy.base_url(route), route.token, case_file, task.case.id)
            return await self._execute(task, proxy, route, env)
        finally:
            proxy.routes.close(route)
            with suppress(OSError):
                case_file.unlink()

    async def _execute(
        self, task: Task, proxy: ProxyServer, route: Route, env: dict[str, str]
    ) -> Sample:
        try:
            process = await anyio.open_process(
                self.argv, env=env, start_new_session=True, stdin=-1, stdout=-1, stderr=-1
            )
        except OSError as exc:
            message = f"cannot start {self.argv[0]!r}: {exc.strerror or exc}"
            return task.sample("error", error_kind="agent_not_started", error=message)
        try:
            out, err = await _exchange(process, task.case.prompt_text().encode())
            code = await process.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await _end_group(process)
        end = task.now()
        proxy.routes.close(route)  # the task's steps are final from here
        return _sample(task, route, code, out, err, end)


def _check_runnable(program: str) -> None:
    """A program that is neither a file nor on PATH fails the run before it starts, not as
    one agent_not_started sample per task."""
    if shutil.which(program) is None and not Path(program).is_file():
        raise TargetError(
            f"cmd: cannot run '{program}': not a file, nor a program on PATH "
            f"(PATH={os.environ.get('PATH', '')!r})"
        )


def _environment(base: str, token: str, case_file: Path, case_id: str) -> dict[str, str]:
    """The agent's environment: perfbench's own, with every model API pointed at its route
    (and keyed with its token: the upstream key stays in the proxy)."""
    return {
        **os.environ,
        "OPENAI_BASE_URL": f"{base}/v1",
        "OPENAI_API_KEY": token,
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": token,
        "PERFBENCH_CASE_FILE": str(case_file),
        "PERFBENCH_CASE_ID": case_id,
    }


async def _exchange(process: Process, stdin: bytes) -> tuple[bytes, str]:
    """Write the input, read stdout (bounded) and the end of stderr until both close."""
    out = bytearray()
    tail = [""]

    async def feed() -> None:
        assert process.stdin is not None
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.send(stdin)
        await process.stdin.aclose()

    async def read_out() -> None:
        assert process.stdout is not None
        async for chunk in process.stdout:
            room = MAX_OUTPUT - len(out)
            if room > 0:
                out.extend(chunk[:room])

    async def read_err() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            tail[0] = (tail[0] + chunk.decode(errors="replace"))[-STDERR_KEPT:]

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        tg.start_soon(read_out)
        tg.start_soon(read_err)
    return bytes(out), tail[0]


async def _end_group(process: Process) -> None:
    """Kill what is left of the agent's process group (its children, or the agent itself at
    a timeout or Ctrl-C), then reap the agent."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with anyio.move_on_after(_KILL_WAIT):
        await process.wait()
    await process.aclose()


def _sample(task: Task, route: Route, code: int, out: bytes, err: str, end: float) -> Sample:
    _agent_steps(task, end)
    models = sum(step.kind == "model" for step in task.steps)
    misses = [f for f in route.failures if f[0] == "replay_miss"]
    if misses:  # the root cause, whatever the agent made of it: the recording lacks a call
        sample = task.sample("error", error_kind="replay_miss", error=misses[0][1], end=end)
    elif code != 0:
        why = f"exit status {code}" if code > 0 else f"killed by {_signal(-code)}"
        failed = f" after a failed model call ({route.failures[0][0]})" if route.failures else ""
        last = " ".join(err.split())[-300:]
        message = f"{why}{failed}" + (f": {last}" if last else "")
        sample = task.sample("error", error_kind="agent_exit", error=message, end=end)
    elif models == 0:
        kind = route.failures[0][0] if route.failures else "no_model_call"
        message = (
            route.failures[0][1]
            if route.failures
            else (
                "the agent answered without a model call through the proxy: does it read "
                "OPENAI_BASE_URL / ANTHROPIC_BASE_URL?"
            )
        )
        sample = task.sample("error", error_kind=kind, error=message, end=end)
    else:
        answer = out.decode(errors="replace")
        expect_ok = task.case.expect.check(tuple(route.tool_calls), answer)
        sample = task.sample("ok", expect_ok=expect_ok, end=end)
    sample.exit_status = code
    sample.tool_calls = len(route.tool_calls)
    return sample


def _agent_steps(task: Task, end: float) -> None:
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


def _signal(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
