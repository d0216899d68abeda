"""Worker processes (``--workers N``): one run's load split over N processes, each with its own
event loop and clients, so that one core does not cap what perfbench can drive.

The parent's ``Fleet`` takes the Runner's place in a Session. It starts N workers (``python -m
perfbench.engine.worker SOCKET INDEX``, each in a session of its own so a Ctrl-C reaches only the
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

The messages are in ``messages``; the worker's side is ``worker``.
"""

from __future__ import annotations

import hmac
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import orjson

from perfbench import host
from perfbench.engine.cluster import Actor, Cluster
from perfbench.engine.messages import (
    Channel,
    Done,
    Failed,
    Go,
    Hello,
    Limit,
    PassDone,
    Ping,
    Pong,
    Ready,
    Refused,
    Samples,
    Start,
    Stop,
)
from perfbench.engine.resume import Resume
from perfbench.engine.runner import Outcome, PassHook, pass_size, todo
from perfbench.engine.share import Share
from perfbench.errors import WorkerError
from perfbench.load import Adaptive
from perfbench.load.aimd import Aimd
from perfbench.sample import Sample
from perfbench.spec import RunSpec
from perfbench.stats.cost import Pricer
from perfbench.stats.histogram import Histogram
from perfbench.stats.summary import RunScopes
from perfbench.store.recorder import Recorder
from perfbench.suite import Suite
from perfbench.targets import Target

START_TIMEOUT_S = 60.0
PINGS = 5  # round trips to a worker on another host, the shortest giving its clock offset


# ---------------------------------------------------------------------------- parent side


@dataclass
class _Worker:
    index: int
    process: anyio.abc.Process | Actor  # a Ray actor (--ray) has a process's face
    channel: Channel | None = None
    stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=64))
    done: Done | None = None
    offset: float = 0.0  # its host's monotonic clock minus ours
    lost: bool = False  # an actor that died (--ray): the run goes on without it, interrupted
    ready: bool = False  # its target is open (its clients, its own mock server on a cluster)

    def tail(self) -> str:
        if isinstance(self.process, Actor):
            return self.process.error or "no error from Ray (see the actor's log)"
        text = b"".join(self.stderr).decode(errors="replace").strip()
        return text[-1500:] or "no output"

    def exited(self) -> bool:
        process = self.process
        code = process.poll() if isinstance(process, Actor) else process.returncode
        return code is not None


class Fleet:
    """Runs a plan in ``plan.workers`` processes; the same face to a Session as a Runner."""

    def __init__(
        self,
        spec: RunSpec,
        suite: Suite,
        target: Target,
        recorder: Recorder,
        *,
        pricer: Pricer,
        price_ref: str | None = None,
        on_pass: PassHook | None = None,
        resume: Resume | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self.spec, self.suite, self.target, self.recorder = spec, suite, target, recorder
        self.plan = spec.plan
        self.pricer, self.price_ref, self.on_pass = pricer, price_ref, on_pass
        self.resume = resume or Resume()
        # Adaptive: the one controller, fed every worker's samples; workers get their shares.
        load, wait = self.plan.load, spec.target.max_retry_wait
        self.aimd = Aimd(load, wait) if isinstance(load, Adaptive) else None
        self._limits: tuple[int, float] | None = None  # the last (limit, hold) sent
        self._limits_changed: anyio.Event | None = None
        self._stopped = False
        self._stop: anyio.Event | None = None  # made in run(): an Event needs the loop
        self._workers: list[_Worker] = []
        self._reports: dict[tuple[str, int], list[RunScopes | None]] = {}
        self._arrived: anyio.Event | None = None
        # Lines are decoded back into Samples only for observers (the live view, --json) and
        # the AIMD controller.
        self._decode = recorder.watched or self.aimd is not None
        self._in_flight: dict[int, int] = {}  # worker → its latest sample's concurrency
        # Per pass, how late each worker's first task started after it was due: the spread
        # is how far from together the passes started (client_summary's start_skew_s).
        self._late: dict[tuple[str, int], list[float]] = {}
        if cluster is None and self.plan.ray is not None:
            cluster = Cluster(self.plan.ray)
        self.cluster = cluster
        self.lost: str | None = None  # why the run was interrupted: an actor died (--ray)
        self.nodes: list[str] = []  # where each actor ran (--ray), for meta.json

    def stop(self) -> None:
        self._stopped = True
        if self._stop is not None:
            self._stop.set()
        self._tell()

    async def run(self) -> Outcome:
        self._stop = anyio.Event()
        self._limits_changed = anyio.Event()
        if self._stopped:
            self._stop.set()
        origin = time.monotonic() - self.resume.clock_offset
        count = self.plan.workers
        with tempfile.TemporaryDirectory(prefix="perfbench-") as tmp:
            async with AsyncExitStack() as stack:
                listener, address = await self._listen_at(Path(tmp) / "fleet.sock", stack)
                stack.push_async_callback(self._reap)
                await stack.enter_async_context(listener)
                self._workers = [await self._spawn(address, i) for i in range(count)]
                async with anyio.create_task_group() as tg:
                    for w in self._workers:
                        tg.start_soon(self._drain_stderr, w)
                    await self._connect(listener)
                    for w in self._workers:
                        await self._channel(w).send(self._start(w, count, origin))
                    for w in self._workers:
                        tg.start_soon(self._listen, w)
                        if self.cluster is not None:
                            tg.start_soon(self._watch, w)
                    tg.start_soon(self._relay_stop)
                    if self.aimd is not None:
                        tg.start_soon(self._relay_limits)
                    await self._passes()
                    await self._finish()
                    tg.cancel_scope.cancel()
        return Outcome(self._stopped, origin, time.monotonic())

    def limit(self) -> int | None:
        return self.aimd.limit if self.aimd is not None else None

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
        for d in done:
            lag.merge(d.lag)
            shares.append(d.cpu_s / d.wall_s if d.wall_s > 0 else 0.0)
        lates = [late for each in self._late.values() for late in each]
        skews = [max(each) - min(each) for each in self._late.values() if len(each) > 1]
        return {
            "loop_lag": lag.summary(),
            "cpu_s": sum(d.cpu_s for d in done),
            "wall_s": max(d.wall_s for d in done),
            "cpu_share": max(shares),
            "workers": len(done),
            "worker_cpu_shares": shares,
            # The largest spread, over the passes, of the workers' first-task lateness, and
            # the latest first task: how together the passes started (seconds).
            "start_skew_s": max(skews) if skews else None,
            "start_late_s": max(lates) if lates else None,
            # Each worker's monotonic clock minus the parent's (0: the same host's clock).
            "clock_offsets_s": [w.offset for w in self._workers],
        }

    def _start(self, w: _Worker, count: int, origin: float) -> Start:
        return Start(
            self.spec,
            self.suite,
            Share(w.index, count),
            origin,
            self.pricer,
            self.price_ref,
            self.resume,
            # An actor of a cluster may be on another node: it starts its own mock (mock+http)
            # where it is. A local Ray instance's actors share the parent's, as processes do.
            self.target.server_url if self.cluster is None or self.cluster.local else None,
            w.offset,
        )

    async def _listen_at(
        self, path: Path, stack: AsyncExitStack
    ) -> tuple[anyio.abc.SocketListener, str]:
        """Where the workers connect: a Unix socket in a private folder, or for Ray actors
        (which may run on other nodes) a TCP port on the address the cluster reaches."""
        if self.cluster is None:
            return await anyio.create_unix_listener(path), str(path)
        self.cluster.join(max(2, self.plan.workers))
        stack.callback(self.cluster.leave)
        tcp = await anyio.create_tcp_listener(local_host=self.cluster.host)
        listener = cast(anyio.abc.SocketListener, tcp.listeners[0])  # one address: one socket
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        return listener, f"tcp:{self.cluster.host}:{port}"

    async def _spawn(self, path: str, index: int) -> _Worker:
        if self.cluster is not None:
            return _Worker(index, self.cluster.spawn(path, index))
        cmd = [sys.executable, "-m", "perfbench.engine.worker", path, str(index)]
        process = await anyio.open_process(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C goes to the parent, which stops us
        )
        return _Worker(index, process)

    async def _drain_stderr(self, w: _Worker) -> None:
        if w.process.stderr is None:  # an actor: Ray keeps its log
            return
        async for chunk in w.process.stderr:
            w.stderr.append(chunk)

    async def _connect(self, listener: anyio.abc.SocketListener) -> None:
        """Accept every worker's connection (each says which it is), or say why one failed."""
        waiting = {w.index for w in self._workers}
        with anyio.move_on_after(START_TIMEOUT_S) as scope:
            while waiting:
                channel = Channel(await self._accept_or_exit(listener))
                if self.cluster is not None and not await self._proven(channel):
                    continue
                hello = await channel.receive()
                assert isinstance(hello, Hello)
                w = self._workers[hello.index]
                w.channel = channel
                w.offset = await self._offset(channel, hello)
                waiting.discard(w.index)
        if scope.cancelled_caught:
            raise WorkerError(
                f"worker(s) {sorted(waiting)} did not start within {START_TIMEOUT_S:g} s"
            )

    async def _offset(self, channel: Channel, hello: Hello) -> float:
        """The worker's monotonic clock minus ours: 0 on this host (one clock); measured by
        round trips on another (its error at most half the shortest of them)."""
        if hello.boot and hello.boot == host.boot_id():
            return 0.0
        pings = []
        for _ in range(PINGS):
            await channel.send(Ping(time.monotonic()))
            pong = await channel.receive()
            assert isinstance(pong, Pong)
            pings.append((pong.sent, pong.clock, time.monotonic()))
        return host.clock_offset(pings)

    async def _proven(self, channel: Channel) -> bool:
        """A TCP connection is an actor's only if its first bytes are the run's token; any
        other is closed unread (frames are pickles)."""
        assert self.cluster is not None
        got = b""
        with anyio.move_on_after(5):
            with suppress(anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                got = await channel.reader.receive_exactly(len(self.cluster.token))
        if hmac.compare_digest(got, self.cluster.token):
            return True
        await channel.aclose()
        return False

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
                        if w.channel is None and w.exited():
                            await anyio.sleep(0.1)  # let its stderr drain
                            raise WorkerError(
                                f"worker {w.index} exited ({w.process.returncode}) before it "
                                f"started: {w.tail()}"
                            )
                    await anyio.sleep(0.05)

            tg.start_soon(accept)
            tg.start_soon(watch)
        return result[0]

    async def _died(self, w: _Worker) -> WorkerError:
        code = await w.process.wait()
        return WorkerError(f"worker {w.index} died (exit code {code}): {w.tail()}")

    def _channel(self, w: _Worker) -> Channel:
        assert w.channel is not None
        return w.channel

    async def _listen(self, w: _Worker) -> None:
        while True:
            try:
                message = await self._channel(w).receive()
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                if self.cluster is not None:  # an actor lost: the run stops, resumable
                    return await self._lose(w)
                raise await self._died(w) from None
            match message:
                case Samples(lines, count):
                    self._samples(lines, count, w.index)
                case Refused(at, retry_after, window) if self.aimd is not None:
                    self.aimd.refused(at, retry_after, window)
                    self._limits_may_change()
                case PassDone(phase, run, scopes, late):
                    # Its last sample said how many were in flight when that task *started*:
                    # with its pass over, none are (else the count stays up after the run).
                    self._in_flight[w.index] = 0
                    self._reports.setdefault((phase, run), []).append(scopes)
                    if late is not None:
                        self._late.setdefault((phase, run), []).append(late)
                    self._tell()
                case Done(warmup_tasks):
                    w.done = message
                    self.recorder.add_warmup(warmup_tasks)
                    self._tell()
                    return
                case Failed(why):
                    raise WorkerError(f"worker {w.index}: {why}")
                case Ready():
                    w.ready = True
                    self._tell()

    async def _watch(self, w: _Worker) -> None:
        """An actor whose node is lost may leave its link open (no connection reset ever
        comes): Ray's own verdict on the actor ends it then, so nothing waits on it."""
        if await w.process.wait() != 0 and w.done is None:
            await self._lose(w)

    async def _lose(self, w: _Worker) -> None:
        """An actor died (its node lost, or killed): its finished samples are recorded; the
        others stop, and the run ends ``interrupted``, to be resumed."""
        if w.lost:
            return
        w.lost = True
        with anyio.move_on_after(10):
            await w.process.wait()
        if self.lost is None:
            self.lost = f"worker {w.index} (a Ray actor) was lost: {w.tail()}"
        self.stop()
        self._tell()

    def _tell(self) -> None:
        if self._arrived is not None:
            self._arrived.set()

    def _samples(self, lines: bytes, count: int, index: int) -> None:
        self.recorder.record_lines(lines, count)
        if not self._decode:
            return
        for line in lines.splitlines():
            sample = Sample.from_json(orjson.loads(line))
            self._in_flight[index] = sample.concurrency
            self.recorder.observe(sample)
            if self.aimd is not None and sample.status != "cancelled":
                self.aimd.observe(sample, heard=sample.throttled)  # each 429 came as Refused
        self._limits_may_change()

    def _limits_may_change(self) -> None:
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
                        share = Share(w.index, len(self._workers)).split(limit)
                        await w.channel.send(Limit(share, hold))

    async def _relay_stop(self) -> None:
        assert self._stop is not None
        await self._stop.wait()
        for w in self._workers:
            if w.done is None and w.channel is not None:
                # A worker that finished (or died: its listener says so) needs no stop.
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await w.channel.send(Stop())

    async def _passes(self) -> None:
        # The first go waits for every worker's target to open: an actor on a cluster starts
        # its own mock server (a second or so), and a go before that made its first pass's
        # tasks start that late (start_late_s 1.2 s on two Ray nodes).
        await self._wait(lambda: self._stopped or all(w.ready or w.lost for w in self._workers))
        for phase, index in self.plan.passes():
            if self._stopped:
                return
            key = (phase, index)
            if self.on_pass is not None and key not in self.resume.whole_passes:
                tasks = len(todo(self.suite, self.plan, self.resume.done, phase, index))
                timed = self.plan.pass_seconds(phase) is not None  # as many as the time allows
                count = pass_size(self.plan, tasks) if tasks and not timed else 0
                if count or (tasks and timed):
                    self.on_pass(phase, index, count)  # 0 for a timed pass, as a Runner says
            start = time.monotonic() + 0.01  # every worker gets its go before this moment
            for w in self._workers:
                if w.lost:
                    continue
                try:
                    await self._channel(w).send(Go(phase, index, start))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # It died between passes: its listener may not have said so yet.
                    raise await self._died(w) from None
            await self._wait(partial(self._reported, key))
            for scopes in self._reports.pop(key):
                if scopes is not None:
                    self.recorder.absorb(index, scopes)
            self.recorder.pass_finished(phase, index)

    def _reported(self, key: tuple[str, int]) -> bool:
        live = sum(not w.lost for w in self._workers)
        return len(self._reports.get(key, ())) >= live

    async def _finish(self) -> None:
        await self._wait(lambda: all(w.done is not None or w.lost for w in self._workers))
        if self.cluster is not None:
            self.nodes = [await self._where(w) for w in self._workers]

    async def _where(self, w: _Worker) -> str:
        assert isinstance(w.process, Actor)
        if w.lost:
            return "lost"
        try:
            return await anyio.to_thread.run_sync(w.process.where)
        except Exception:  # an actor that died after its last report
            return "unknown"

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
