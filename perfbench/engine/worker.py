"""The worker side of ``--workers N``: ``python -m perfbench.engine.worker SOCKET INDEX``.

A worker connects back to its parent's ``Fleet``, receives a ``Start``, builds its own target
from the target string, and runs a ``Runner`` over its share of every pass, waiting for the
parent's go before each. Its samples go to the parent as JSON lines in batches (at most
``FLUSH_S`` late); at the end of each pass it hands over what its statistics accumulated.
Ctrl-C is the parent's to handle: a worker ignores SIGINT and stops when told, or when its
parent's socket closes."""

from __future__ import annotations

import signal
import sys
import time
from contextlib import AsyncExitStack

import anyio
import anyio.abc
import orjson

from perfbench import host
from perfbench.engine.messages import (
    Channel,
    Done,
    Failed,
    FromWorker,
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
from perfbench.engine.runner import Runner
from perfbench.errors import reason
from perfbench.load import Adaptive
from perfbench.sample import Phase, Sample
from perfbench.stats.cost import price
from perfbench.stats.summary import Summarizer
from perfbench.store.recorder import Price, Recorder
from perfbench.targets import open_target
from perfbench.targets.registry import resolve
from perfbench.targets.target_spec import Sizing

FLUSH_S = 0.05  # how late a worker's samples may reach samples.jsonl
FLUSH_LINES = 512


class _LineSink:
    """The worker's Recorder writer: samples become JSON lines, sent in batches."""

    def __init__(self, link: _Link) -> None:
        self.link = link

    def write(self, sample: Sample) -> None:
        first = self.link.first
        key = (sample.phase, sample.run)
        earliest = first.get(key)
        if earliest is None or sample.start < earliest.start:
            first[key] = sample
        self.link.lines.append(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))
        if len(self.link.lines) >= FLUSH_LINES:
            self.link.wake()

    def write_lines(self, lines: bytes) -> None:
        self.link.lines.append(lines)

    def close(self) -> None:
        pass


class _WorkerRecorder(Recorder):
    """At a pass's end: hand the pass's statistics to the parent instead of closing them."""

    def __init__(self, link: _Link, summarizer: Summarizer, price: Price, origin: float) -> None:
        super().__init__(summarizer, writer=_LineSink(link), price=price)
        self.link, self.origin = link, origin

    def pass_finished(self, phase: Phase, run: int) -> None:
        scopes = self.summarizer.take_run(run) if phase == "measured" else None
        self.link.post(PassDone(phase, run, scopes, self._late(phase, run)))

    def _late(self, phase: Phase, run: int) -> float | None:
        """Its first task's start after its due time: the open loop's schedule, else the
        pass's go (the parent's clock, shared: a run's times count from ``origin``)."""
        first = self.link.first.pop((phase, run), None)
        go = self.link.began.get((phase, run))
        if first is None:
            return None
        if first.scheduled is not None:
            return first.start - first.scheduled
        return None if go is None else first.start - (go - self.origin)


class _Link:
    """The worker's end of the socket: an outbox drained by one sender task (so the
    synchronous recorder never waits on the socket), and the parent's go per pass."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.lines: list[bytes] = []
        self.outbox: list[FromWorker] = []
        self._wake = anyio.Event()
        self._go: dict[tuple[str, int], float] = {}
        self.began: dict[tuple[str, int], float] = {}  # each pass's go (its start time)
        self.offset = 0.0  # this host's monotonic clock minus the parent's
        self.first: dict[tuple[str, int], Sample] = {}  # each pass's earliest task here
        self._go_event = anyio.Event()
        self._flushing = anyio.Lock()
        self.stopped = False

    def wake(self) -> None:
        self._wake.set()

    def post(self, message: FromWorker) -> None:
        self._pack_lines()
        self.outbox.append(message)
        self._wake.set()

    def _pack_lines(self) -> None:
        if self.lines:
            lines, self.lines = self.lines, []
            self.outbox.append(Samples(b"".join(lines), len(lines)))

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
                message = Stop()  # the parent is gone: stop, keep nothing running
            match message:
                case Go(phase, run, start):
                    self._go[(phase, run)] = start + self.offset  # on this host's clock
                    self._go_event.set()
                case Limit(share, hold_until):
                    runner.set_limit(share, hold_until)
                case Stop():
                    self.stopped = True
                    runner.stop()
                    self._go_event.set()
                    return

    async def go(self, phase: Phase, index: int) -> float | None:
        """Wait for the parent's go for this pass; its start time is the open-loop base."""
        while (phase, index) not in self._go and not self.stopped:
            self._go_event = anyio.Event()
            await self._go_event.wait()
        start = self._go.pop((phase, index), None)
        if start is not None:
            self.began[(phase, index)] = start
        return start


async def _serve(address: str, index: int, token: bytes = b"") -> None:
    """Connect to the parent at ``address`` (a Unix socket's path, or ``tcp:HOST:PORT`` for
    a Ray actor, which first sends its ``token``) and work until told to stop."""
    if address.startswith("tcp:"):
        where, _, port = address.removeprefix("tcp:").rpartition(":")
        stream: anyio.abc.SocketStream = await anyio.connect_tcp(where, int(port))
        await stream.send(token)
    else:
        stream = await anyio.connect_unix(address)
    channel = Channel(stream)
    link = _Link(channel)
    await channel.send(Hello(index, host.boot_id()))
    start = await _started(channel)
    link.offset = start.offset
    try:
        await _work(start, link)
    except Exception as exc:  # perfbench's own failure in the worker: the parent reports it
        link.post(Failed(reason(exc)))
        await link.flush()
        raise
    finally:
        await channel.aclose()


async def _started(channel: Channel) -> Start:
    """The Start, after answering the parent's clock pings (a worker on another host)."""
    while True:
        message = await channel.receive()
        if isinstance(message, Start):
            return message
        if isinstance(message, Ping):
            await channel.send(Pong(message.sent, time.monotonic()))


async def _work(start: Start, link: _Link) -> None:
    suite, plan, share = start.suite, start.spec.plan, start.share
    connections = plan.connections()  # 0 (no limit) stays 0
    mine = max(1, share.split(connections)) if connections else 0
    target = resolve(start.spec.target, Sizing(mine, plan.seed, start.server_url))
    summarizer = Summarizer(suite.timeouts(), start.spec.objectives())

    simulated = target.simulated

    def priced(sample: Sample) -> float | None:
        return price(start.pricer, start.price_ref, simulated, sample)

    origin = start.origin + start.offset  # the run's t0 on this host's clock
    recorder = _WorkerRecorder(link, summarizer, priced, origin)
    runner = Runner(
        suite,
        target,
        plan,
        recorder,
        resume=start.resume,
        share=share,
        origin=origin,
        go=link.go,
        follower=isinstance(plan.load, Adaptive),  # the parent's controller sets the limit
        refusals=lambda at, wait, window: link.post(Refused(at, wait, window)),
    )

    async with anyio.create_task_group() as tg:
        tg.start_soon(link.sender)
        tg.start_soon(link.receiver, runner)
        async with AsyncExitStack() as stack:
            await open_target(target, stack)
            start.pricer.prepare(start.price_ref)
            link.post(Ready())
            await runner.run()
        monitor = runner.monitor
        assert monitor is not None
        client = monitor.summary()
        link.post(Done(summarizer.warmup_tasks, monitor.lag, client["cpu_s"], client["wall_s"]))
        await link.flush()
        tg.cancel_scope.cancel()


def serve(address: str, index: int, token: bytes) -> None:
    """A worker in a process that is not its own (a Ray actor): no signal or stream of the
    host process is touched."""
    anyio.run(_serve, address, index, token, backend_options=host.loop_options())


def main(argv: list[str]) -> None:
    path, index = argv[0], int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    sys.stdout = sys.stderr  # nothing may write to a stream the parent does not read
    anyio.run(_serve, path, index, backend_options=host.loop_options())


if __name__ == "__main__":
    main(sys.argv[1:])
