"""Worker processes (``--workers N``): one run's load split over N processes, each with its own
event loop and clients, so that one core does not cap what perfbench can drive.

The parent's ``Fleet`` takes the Runner's place in a Session. It starts N workers (``python -m
perfbench.workers SOCKET INDEX``, each in a session of its own so a Ctrl-C reaches only the
parent, which then stops them), which connect back over a Unix socket. Each worker builds its
own target from the target string, and runs a Runner over its share of every pass:

- closed loop: worker k gets ``concurrency // N`` (+1 for the first ``concurrency % N``) tasks
  in flight and the tasks of those slots;
- open loop: every worker computes the same seeded schedule and takes the arrivals whose
  case's place in the suite + iteration ≡ k (mod N) (interleaved schedules; one shared start
  time per pass, sent by the parent);
- either way a worker's cases change from round to round (``Runner._mine``);
- adaptive: the parent runs the one AIMD controller over every worker's samples (so a 429
  seen by one slows all) and sends each worker its share of the limit (which may be 0) and
  the hold the server asked for; workers follow.

Passes start together: each worker waits for the parent's go before every pass, and the next
go is sent when every worker has finished the pass, so passes never overlap. Samples stream to
the parent as JSON lines (at most ``FLUSH_S`` late), which appends them to samples.jsonl; at the
end of a pass each worker hands over what its Summarizer accumulated, and the parent merges it
(HDR histograms merge losslessly, raw values stay exact). Every sample is on one timeline:
workers use the parent's start time on the shared monotonic clock.

Frames are a 4-byte length and a pickle. Parent → worker: a ``Recipe``, then ``("go", phase,
run, start)`` per pass, ``("limit", share, hold_until)`` (adaptive) and ``("stop",)``. Worker →
parent: ``("ready",)``, ``("samples", lines, n)``, ``("pass", phase, run, scopes)``,
``("done", warmup_tasks, lag, cpu_s, wall_s)`` or ``("error", text)``.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream

from perfbench import host
from perfbench.cost import Pricer
from perfbench.errors import WorkerError, reason
from perfbench.histogram import Histogram
from perfbench.load import Adaptive
from perfbench.load.adaptive import Aimd
from perfbench.recorder import Recorder
from perfbench.runner import Outcome, PassHook, Plan, Runner, split, todo
from perfbench.sample import Phase, Sample
from perfbench.stats import Summarizer
from perfbench.store import SampleWriter
from perfbench.suite import Suite
from perfbench.targets import open_target
from perfbench.targets.registry import TargetOptions, resolve

FLUSH_S = 0.05  # how late a worker's samples may reach samples.jsonl
FLUSH_LINES = 512
START_TIMEOUT_S = 60.0
_HEADER = struct.Struct(">I")


@dataclass(frozen=True)
class Recipe:
    """Everything a worker needs to run its share; pickled to it. Holds no API key: a worker
    reads keys from the environment it inherits, as the parent did."""

    suite: Suite
    plan: Plan
    target: str
    options: TargetOptions
    share: tuple[int, int]
    origin: float  # the run's t0 on the monotonic clock that every process shares
    pricer: Pricer | None = None
    price_ref: str | None = None
    skip: frozenset[tuple[str, int, str, int]] = frozenset()
    skip_passes: frozenset[tuple[str, int]] = frozenset()


def auto_workers(plan: Plan, cpus: int | None = None) -> int:
    """``--workers auto``: one worker per 128 tasks in flight (or per 1,000 open-loop tasks/s),
    at most one per core. One worker handles far more than either on this client stack; more
    would only add start-up time and pass barriers."""
    from perfbench.load import Rate

    cpus = cpus or os.cpu_count() or 1
    if isinstance(plan.load, Adaptive):
        return 1
    if isinstance(plan.load, Rate):
        wanted = math.ceil(plan.load.per_second / 1000)
    else:
        wanted = math.ceil(plan.concurrency / 128)
    return max(1, min(cpus, wanted))


# ---------------------------------------------------------------------------- framing


class _Channel:
    """One end of the socket: whole frames in and out; one send at a time (the sender task
    and a final flush, or a go and a stop, must not interleave their bytes)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)
        self._lock = anyio.Lock()

    async def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        async with self._lock:
            await self.stream.send(_HEADER.pack(len(data)) + data)

    async def receive(self) -> Any:
        (size,) = _HEADER.unpack(await self.reader.receive_exactly(_HEADER.size))
        return pickle.loads(await self.reader.receive_exactly(size))

    async def aclose(self) -> None:
        await self.stream.aclose()


# ---------------------------------------------------------------------------- parent side


@dataclass
class _Worker:
    index: int
    process: anyio.abc.Process
    channel: _Channel | None = None
    stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=64))
    done: tuple[Any, ...] | None = None

    def tail(self) -> str:
        text = b"".join(self.stderr).decode(errors="replace").strip()
        return text[-1500:] or "no output"


class Fleet:
    """Runs a plan in ``plan.workers`` processes; the same face to a Session as a Runner."""

    def __init__(
        self,
        suite: Suite,
        target: Any,
        plan: Plan,
        recorder: Recorder,
        *,
        recipe: tuple[str, TargetOptions],
        pricer: Pricer | None = None,
        price_ref: str | None = None,
        on_pass: PassHook | None = None,
    ) -> None:
        self.suite, self.target, self.plan, self.recorder = suite, target, plan, recorder
        self.spec, self.options = recipe
        self.pricer, self.price_ref, self.on_pass = pricer, price_ref, on_pass
        self.skip: set[tuple[str, int, str, int]] = set()
        self.skip_passes: set[tuple[str, int]] = set()
        self.resume_at = 0.0
        # Adaptive: the one controller, fed every worker's samples; workers get their shares.
        self.aimd = Aimd(plan.load) if isinstance(plan.load, Adaptive) else None
        self._limits: tuple[int, float] | None = None  # the last (limit, hold) sent
        self._limits_changed: anyio.Event | None = None
        self._stopped = False
        self._stop: anyio.Event | None = None  # made in run(): an Event needs the loop
        self._workers: list[_Worker] = []
        self._reports: dict[tuple[str, int], list[Any]] = {}
        self._arrived: anyio.Event | None = None
        # Lines are decoded back into Samples only for observers (the live view, --json) and
        # the AIMD controller.
        self._decode = bool(recorder.observers) or self.aimd is not None
        self._in_flight: dict[int, int] = {}  # worker → its latest sample's concurrency

    def stop(self) -> None:
        self._stopped = True
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> Outcome:
        self._stop = anyio.Event()
        self._limits_changed = anyio.Event()
        if self._stopped:
            self._stop.set()
        origin = time.monotonic() - self.resume_at
        count = self.plan.workers
        with tempfile.TemporaryDirectory(prefix="perfbench-") as tmp:
            path = str(Path(tmp) / "fleet.sock")
            listener = await anyio.create_unix_listener(path)
            async with AsyncExitStack() as stack:
                stack.push_async_callback(self._reap)
                await stack.enter_async_context(listener)
                self._workers = [await self._spawn(path, i) for i in range(count)]
                async with anyio.create_task_group() as tg:
                    for w in self._workers:
                        tg.start_soon(self._drain_stderr, w)
                    await self._connect(listener)
                    for w in self._workers:
                        await self._channel(w).send(self._recipe(w.index, count, origin))
                    for w in self._workers:
                        tg.start_soon(self._listen, w)
                    tg.start_soon(self._relay_stop)
                    if self.aimd is not None:
                        tg.start_soon(self._relay_limits)
                    await self._passes()
                    await self._finish()
                    tg.cancel_scope.cancel()
        return Outcome(self._stopped, origin, time.monotonic())

    def tasks_in_flight(self) -> int:
        """Tasks running in all workers, as their latest samples said (each sample carries its
        own worker's count)."""
        return sum(self._in_flight.values())

    def client_summary(self) -> dict[str, Any] | None:
        """The workers' loop lag (merged) and CPU (the busiest worker's share of a core)."""
        done = [w.done for w in self._workers if w.done is not None]
        if not done:
            return None
        lag = Histogram()
        shares = []
        for _, worker_lag, cpu, wall in done:
            lag.merge(worker_lag)
            shares.append(cpu / wall if wall > 0 else 0.0)
        return {
            "loop_lag": lag.summary(),
            "cpu_s": sum(d[2] for d in done),
            "wall_s": max(d[3] for d in done),
            "cpu_share": max(shares),
            "workers": len(done),
            "worker_cpu_shares": shares,
        }

    def _recipe(self, index: int, count: int, origin: float) -> Recipe:
        connections = self.options.concurrency  # 0 (no limit) stays 0
        options = replace(
            self.options,
            concurrency=max(1, split(connections, (index, count))) if connections else 0,
            server_url=getattr(self.target, "url", None),
        )
        return Recipe(
            self.suite,
            self.plan,
            self.spec,
            options,
            (index, count),
            origin,
            self.pricer,
            self.price_ref,
            frozenset(self.skip),
            frozenset(self.skip_passes),
        )

    async def _spawn(self, path: str, index: int) -> _Worker:
        cmd = [sys.executable, "-m", "perfbench.workers", path, str(index)]
        process = await anyio.open_process(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C goes to the parent, which stops us
        )
        return _Worker(index, process)

    async def _drain_stderr(self, w: _Worker) -> None:
        assert w.process.stderr is not None
        async for chunk in w.process.stderr:
            w.stderr.append(chunk)

    async def _connect(self, listener: anyio.abc.SocketListener) -> None:
        """Accept every worker's connection (each says which it is), or say why one failed."""
        waiting = {w.index for w in self._workers}
        with anyio.move_on_after(START_TIMEOUT_S) as scope:
            while waiting:
                channel = _Channel(await self._accept_or_exit(listener))
                hello = await channel.receive()
                w = self._workers[hello[1]]
                w.channel = channel
                waiting.discard(w.index)
        if scope.cancelled_caught:
            raise WorkerError(
                f"worker(s) {sorted(waiting)} did not start within {START_TIMEOUT_S:g} s"
            )

    async def _accept_or_exit(self, listener: anyio.abc.SocketListener) -> Any:
        """The next connection; a worker that exits before connecting fails the run at once."""
        result: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def accept() -> None:
                result.append(await listener.accept())
                tg.cancel_scope.cancel()

            async def watch() -> None:
                while True:
                    for w in self._workers:
                        if w.channel is None and w.process.returncode is not None:
                            await anyio.sleep(0.1)  # let its stderr drain
                            raise WorkerError(
                                f"worker {w.index} exited ({w.process.returncode}) before it "
                                f"started: {w.tail()}"
                            )
                    await anyio.sleep(0.05)

            tg.start_soon(accept)
            tg.start_soon(watch)
        return result[0]

    def _channel(self, w: _Worker) -> _Channel:
        assert w.channel is not None
        return w.channel

    async def _listen(self, w: _Worker) -> None:
        while True:
            try:
                message = await self._channel(w).receive()
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                code = await w.process.wait()
                raise WorkerError(f"worker {w.index} died (exit code {code}): {w.tail()}") from None
            kind = message[0]
            if kind == "samples":
                self._samples(message[1], message[2], w.index)
            elif kind == "pass":
                self._reports.setdefault((message[1], message[2]), []).append(message[3])
                if self._arrived is not None:
                    self._arrived.set()
            elif kind == "done":
                w.done = message[1:]
                self.recorder.summarizer.warmup_tasks += message[1]
                if self._arrived is not None:
                    self._arrived.set()
                return
            elif kind == "error":
                raise WorkerError(f"worker {w.index}: {message[1]}")

    def _samples(self, lines: bytes, n: int, index: int) -> None:
        if isinstance(self.recorder.writer, SampleWriter):
            self.recorder.writer.write_lines(lines)
        self.recorder.recorded += n
        if not self._decode:
            return
        for line in lines.splitlines():
            sample = Sample.from_json(orjson.loads(line))
            self._in_flight[index] = sample.concurrency
            for observe in self.recorder.observers:
                observe(sample)
            if self.aimd is not None and sample.status != "cancelled":
                self.aimd.observe(sample)
        changed = self.aimd is not None and (self.aimd.limit, self.aimd.hold_until) != self._limits
        if changed and self._limits_changed is not None:
            self._limits_changed.set()

    async def _relay_limits(self) -> None:
        """Send every worker its share of the AIMD limit whenever the limit or hold changes."""
        assert self.aimd is not None and self._limits_changed is not None
        while True:
            await self._limits_changed.wait()
            self._limits_changed = anyio.Event()
            self._limits = (self.aimd.limit, self.aimd.hold_until)
            limit, hold = self._limits
            for w in self._workers:
                if w.done is None and w.channel is not None:
                    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await w.channel.send(
                            ("limit", split(limit, (w.index, len(self._workers))), hold)
                        )

    async def _relay_stop(self) -> None:
        assert self._stop is not None
        await self._stop.wait()
        for w in self._workers:
            if w.done is None and w.channel is not None:
                # A worker that finished (or died: its listener says so) needs no stop.
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await w.channel.send(("stop",))

    async def _passes(self) -> None:
        for phase, index in self.plan.passes():
            if self._stopped:
                return
            key = (phase, index)
            if self.on_pass is not None and key not in self.skip_passes:
                count = len(todo(self.suite, self.plan, self.skip, phase, index))
                if count:
                    self.on_pass(phase, index, count)
            start = time.monotonic() + 0.01  # every worker gets its go before this moment
            for w in self._workers:
                await self._channel(w).send(("go", phase, index, start))
            await self._wait(partial(self._reported, key))
            for scopes in self._reports.pop(key):
                if scopes is not None:
                    self.recorder.summarizer.absorb(index, scopes)
            self.recorder.pass_finished(phase, index)

    def _reported(self, key: tuple[str, int]) -> bool:
        return len(self._reports.get(key, ())) >= len(self._workers)

    async def _finish(self) -> None:
        await self._wait(lambda: all(w.done is not None for w in self._workers))

    async def _wait(self, ready: Callable[[], bool]) -> None:
        while not ready():
            self._arrived = anyio.Event()
            await self._arrived.wait()

    async def _reap(self) -> None:
        """Close the links and make sure no worker outlives the run."""
        for w in self._workers:
            if w.channel is not None:
                await w.channel.aclose()
        with anyio.CancelScope(shield=True):
            for w in self._workers:
                with anyio.move_on_after(5):
                    await w.process.wait()
                if w.process.returncode is None:
                    w.process.kill()
                    await w.process.wait()
                await w.process.aclose()


# ---------------------------------------------------------------------------- worker side


class _LineSink:
    """The worker's Recorder writer: samples become JSON lines, sent in batches."""

    def __init__(self, link: _Link) -> None:
        self.link = link

    def write(self, sample: Sample) -> None:
        self.link.lines.append(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))
        if len(self.link.lines) >= FLUSH_LINES:
            self.link.wake()

    def close(self) -> None:
        pass


class _WorkerRecorder(Recorder):
    """At a pass's end: hand the pass's statistics to the parent instead of closing them."""

    link: _Link

    def pass_finished(self, phase: Phase, run: int) -> None:
        scopes = self.summarizer.take_run(run) if phase == "measured" else None
        self.link.post(("pass", phase, run, scopes))


class _Link:
    """The worker's end of the socket: an outbox drained by one sender task (so the
    synchronous recorder never waits on the socket), and the parent's go per pass."""

    def __init__(self, channel: _Channel) -> None:
        self.channel = channel
        self.lines: list[bytes] = []
        self.outbox: list[Any] = []
        self._wake = anyio.Event()
        self._go: dict[tuple[str, int], float] = {}
        self._go_event = anyio.Event()
        self._flushing = anyio.Lock()
        self.stopped = False

    def wake(self) -> None:
        self._wake.set()

    def post(self, message: Any) -> None:
        self._pack_lines()
        self.outbox.append(message)
        self._wake.set()

    def _pack_lines(self) -> None:
        if self.lines:
            lines, self.lines = self.lines, []
            self.outbox.append(("samples", b"".join(lines), len(lines)))

    async def sender(self) -> None:
        while True:
            with anyio.move_on_after(FLUSH_S):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        # One flusher at a time (the sender task, or the final flush): messages leave in the
        # order they were posted, so a pass's report never overtakes its samples, nor "done".
        async with self._flushing:
            self._pack_lines()
            while self.outbox:
                outbox, self.outbox = self.outbox, []
                for message in outbox:
                    await self.channel.send(message)

    async def receiver(self, runner: Runner) -> None:
        while True:
            try:
                message = await self.channel.receive()
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                message = ("stop",)  # the parent is gone: stop, keep nothing running
            if message[0] == "go":
                self._go[(message[1], message[2])] = message[3]
                self._go_event.set()
            elif message[0] == "limit":
                runner.set_limit(message[1], message[2])
            elif message[0] == "stop":
                self.stopped = True
                runner.stop()
                self._go_event.set()
                return

    async def gate(self, phase: Phase, index: int) -> float | None:
        """Wait for the parent's go for this pass; its start time is the open-loop base."""
        while (phase, index) not in self._go and not self.stopped:
            self._go_event = anyio.Event()
            await self._go_event.wait()
        return self._go.pop((phase, index), None)


async def _serve(path: str, index: int) -> None:
    channel = _Channel(await anyio.connect_unix(path))
    link = _Link(channel)
    await channel.send(("hello", index))
    recipe: Recipe = await channel.receive()
    try:
        await _work(recipe, link)
    except Exception as exc:  # perfbench's own failure in the worker: the parent reports it
        link.post(("error", reason(exc)))
        await link.flush()
        raise
    finally:
        await channel.aclose()


async def _work(recipe: Recipe, link: _Link) -> None:
    suite, plan = recipe.suite, recipe.plan
    target = resolve(recipe.target, recipe.options)
    summarizer = Summarizer({c.id: c.timeout_s for c in suite.cases})

    def price(tokens_in: int | None, tokens_out: int | None) -> float | None:
        if recipe.pricer is None:
            return None
        return recipe.pricer.cost(recipe.price_ref, tokens_in, tokens_out)

    recorder = _WorkerRecorder(summarizer, writer=_LineSink(link), price=price)
    recorder.link = link
    runner = Runner(
        suite, target, plan, recorder, share=recipe.share, origin=recipe.origin, gate=link.gate
    )
    runner.skip = set(recipe.skip)
    runner.skip_passes = set(recipe.skip_passes)
    runner.follower = runner.aimd is not None  # the parent's controller sets the limit

    async with anyio.create_task_group() as tg:
        tg.start_soon(link.sender)
        tg.start_soon(link.receiver, runner)
        async with AsyncExitStack() as stack:
            await open_target(target, stack)
            link.post(("ready",))
            await runner.run()
        monitor = runner.monitor
        assert monitor is not None
        client = monitor.summary()
        link.post(("done", summarizer.warmup_tasks, monitor.lag, client["cpu_s"], client["wall_s"]))
        await link.flush()
        tg.cancel_scope.cancel()


def main(argv: list[str]) -> None:
    path, index = argv[0], int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    sys.stdout = sys.stderr  # nothing may write to a stream the parent does not read
    anyio.run(_serve, path, index, backend_options=host.loop_options())


if __name__ == "__main__":
    main(sys.argv[1:])
