"""``-t "cmd:python my_agent.py --fast"``: any program as the agent, run once per task.

The rest of the target string is the command line, split as a POSIX shell splits words
(``shlex``) but run without a shell. Each task's process gets:

- the case's input on stdin (then stdin closes), and the whole case as JSON in the file named
  by ``PERFBENCH_CASE_FILE`` (``PERFBENCH_CASE_ID`` too);
- ``OPENAI_BASE_URL`` (``…/t/<token>/v1``), ``ANTHROPIC_BASE_URL`` (``…/t/<token>``) and both
  ``*_API_KEY``\\s set to its route of perfbench's proxy (``perfbench.proxy``), which forwards
  every model call to ``--upstream`` and times it onto the task;
- its own process group (session), so that at the case's ``timeout_s`` or on Ctrl-C the
  group is killed, children included, and nothing is left running. Its answer is read until
  it exits (not until every process that inherited stdout closes it); at the task's end what
  it left running (its session, whatever holds its stdout or stderr: ``leftovers``) is
  killed, and counted in the sample's ``leftovers``.

Its stdout (up to ``MAX_OUTPUT``) is the answer, checked against the case's ``expect``. The
sample's steps are the model calls the proxy saw, and ``agent`` steps for the rest of the
task's time: from the task's start to its process's exit, every moment no model call was in
flight (the critical path; overlapping calls count once), so the model steps' union and the
agent steps add up to the task's latency. A status other than 0 (``agent_exit``, with the end
of its stderr), a program that cannot start (``agent_not_started``) and an answer made with no
model call (``no_model_call``) are failed samples."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import tempfile
from collections.abc import Mapping
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Self

import anyio
import orjson
from anyio.abc import Process

from perfbench.errors import TargetError
from perfbench.sample import Sample
from perfbench.suite import Suite
from perfbench.targets import Target, leftovers
from perfbench.targets.proxied import ModelAccess, Outcome, ProxyHost, Via, attributed, settle
from perfbench.task import Task

if TYPE_CHECKING:
    from perfbench.proxy.upstream import Upstream
    from perfbench.targets.target_spec import Sizing, TargetSpec

PREFIX = "cmd:"
MAX_OUTPUT = 1 << 20  # an answer's bytes kept; the rest is read and dropped
STDERR_KEPT = 2000  # characters of stderr's end kept for a failed sample's message
_KEY_LENGTH = 8  # a shorter "secret" (a test's) would match values by chance
_KILL_WAIT = 5.0  # seconds to wait for a killed group's leader to be reaped
DRAIN_S = 0.2  # how long stdout is read after the agent's exit while another process holds it


class CommandTarget(Target):
    def __init__(
        self,
        command: str,
        spec: TargetSpec,
        sizing: Sizing,
        upstream: Upstream | None = None,
        withheld: frozenset[str] = frozenset(),
    ) -> None:
        """``upstream``: where the proxy forwards (None: a mock+http[:profile] upstream,
        started when the target is entered, or the one at ``sizing.server_url``);
        ``withheld``: the variables the upstream's credentials are read from, left out of
        the agent's environment (``registry.upstream_variables``)."""
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise TargetError(f"cmd: cannot split the command line {command!r}: {exc}") from None
        if not self.argv:
            raise TargetError('cmd: give the command to run, e.g. -t "cmd:python agent.py"')
        _check_runnable(self.argv[0])
        self._name = PREFIX + command
        self._host = ProxyHost(spec, sizing, upstream)
        self.price_ref, self.simulated = self._host.price_ref, self._host.simulated
        self.server_url = self._host.server_url
        self._stack = AsyncExitStack()
        self._dir: Path | None = None
        self._withheld = withheld
        self._base_env: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self._name

    def check(self, suite: Suite) -> None:
        self._host.suite = suite
        for case in suite.checked():
            if case.turns is not None:
                raise TargetError(
                    f"case {case.id} has turns: a cmd: agent gets one input on stdin; run "
                    "multi-turn cases against a model target"
                )

    async def __aenter__(self) -> Self:
        await self._host.start()
        self._stack.push_async_callback(self._host.aclose)
        self.server_url, self.secrets = self._host.server_url, self._host.secrets
        self._base_env = agent_environment(self._withheld, self.secrets)
        self._dir = Path(tempfile.mkdtemp(prefix="perfbench-cmd-"))
        self._stack.callback(shutil.rmtree, self._dir, True)
        return self

    async def aclose(self) -> None:
        await self._stack.aclose()

    async def run(self, task: Task) -> Sample:
        if self._dir is None:
            raise TargetError("cmd: target used outside its context (proxy not started)")
        via = self._host.open(task)
        task.settle = functools.partial(settle, task, via)  # a timeout's sample, too
        case_file = self._dir / f"{via.route.token}.json"
        try:
            case_file.write_bytes(orjson.dumps(task.case.model_dump(mode="json")))
            env = _environment(self._base_env, via.access, case_file, task.case.id)
            return await self._execute(task, via, env)
        finally:
            via.close()
            with suppress(OSError):
                case_file.unlink()

    async def _execute(self, task: Task, via: Via, env: dict[str, str]) -> Sample:
        try:
            process = await anyio.open_process(
                self.argv, env=env, start_new_session=True, stdin=-1, stdout=-1, stderr=-1
            )
        except OSError as exc:
            message = f"cannot start {self.argv[0]!r}: {exc.strerror or exc}"
            return task.sample("error", error_kind="agent_not_started", error=message)
        pipes = leftovers.pipes(process.pid)
        held_open, left = True, 0  # until its exit says otherwise: look for holders
        try:
            code, out, err, held_open = await _exchange(process, task.case.prompt_text().encode())
            end = task.now()  # the agent's exit (its answer is read by then)
        finally:
            with anyio.CancelScope(shield=True):
                left = await _end_group(process, pipes if held_open else frozenset())
        if code != 0:  # the fault it failed of may be in a call still being read
            await via.calls_done()
        sample = attributed(task, via, end, _outcome(code, out, err), _NO_CALL)
        sample.leftovers = left or None
        return sample


def _check_runnable(program: str) -> None:
    """A program that is neither a file nor on PATH fails the run before it starts, not as
    one agent_not_started sample per task."""
    if shutil.which(program) is None and not Path(program).is_file():
        raise TargetError(
            f"cmd: cannot run '{program}': not a file, nor a program on PATH "
            f"(PATH={os.environ.get('PATH', '')!r})"
        )


def agent_environment(
    withheld: frozenset[str], secrets: tuple[str, ...], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """perfbench's environment without what would hand an agent the upstream's key: the
    variables named in ``withheld`` and any whose value holds one of ``secrets`` (the key
    copied under another name). Everything else (PATH, HOME, the agent's own settings)
    stays."""
    return {
        name: value
        for name, value in environ.items()
        if name not in withheld and not any(s in value for s in secrets if len(s) >= _KEY_LENGTH)
    }


def _environment(
    base: Mapping[str, str], access: ModelAccess, case_file: Path, case_id: str
) -> dict[str, str]:
    """The agent's environment: ``base`` (perfbench's own, the upstream's credentials left
    out), with every model API pointed at its route (and keyed with its token: the upstream
    key stays in the proxy)."""
    return {
        **base,
        "OPENAI_BASE_URL": access.openai_base_url,
        "OPENAI_API_KEY": access.api_key,
        "ANTHROPIC_BASE_URL": access.anthropic_base_url,
        "ANTHROPIC_API_KEY": access.api_key,
        "PERFBENCH_CASE_FILE": str(case_file),
        "PERFBENCH_CASE_ID": case_id,
    }


async def _exchange(process: Process, stdin: bytes) -> tuple[int, bytes, str, bool]:
    """Write the input, read stdout (bounded) and the end of stderr until the agent exits
    and they close; a process it left holding them (a ``setsid`` child) does not hold the
    answer: what was written is read for ``DRAIN_S`` more, then reading stops. The exit
    status, the answer, the end of stderr, and whether they were still held open."""
    out = bytearray()
    tail = [""]
    closed = anyio.Event()

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

    async def read_both() -> None:
        async with anyio.create_task_group() as readers:
            readers.start_soon(read_out)
            readers.start_soon(read_err)
        closed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        tg.start_soon(read_both)
        code = await process.wait()
        with anyio.move_on_after(DRAIN_S):
            await closed.wait()
        tg.cancel_scope.cancel()  # still open: an inheritor holds them, not the agent
    return code, bytes(out), tail[0], not closed.is_set()


async def _end_group(process: Process, held: frozenset[str]) -> int:
    """Kill what the agent left running (``leftovers``: its session, and whatever holds a
    pipe of ``held``), and its process group (the agent itself at a timeout or Ctrl-C), then
    reap the agent: the number of processes other than the agent that were killed."""
    left = leftovers.kill_leftovers(process.pid, held, spare=process.pid)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with anyio.move_on_after(_KILL_WAIT):
        await process.wait()
    await process.aclose()
    return left


_NO_CALL = (
    "the agent answered without a model call through the proxy: does it read "
    "OPENAI_BASE_URL / ANTHROPIC_BASE_URL?"
)


def _outcome(code: int, out: bytes, err: str) -> Outcome:
    """The process's end: a status other than 0 is its failure, with the end of stderr."""
    if code == 0:
        return Outcome(answer=out.decode(errors="replace"), exit_status=code)
    why = f"exit status {code}" if code > 0 else f"killed by {_signal(-code)}"
    last = " ".join(err.split())[-300:]
    message = why + (f": {last}" if last else "")
    return Outcome(failure=("error", "agent_exit", message), exit_status=code)


def _signal(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
