"""The runner: phases, passes, concurrency, timeouts and cancellation.

A run is ``warmup`` passes over the suite, then ``runs`` measured passes; in every pass each
case executes ``repeat`` times. Passes run one after another (each has its own window), and
inside a pass ``concurrency`` workers pull tasks from one queue (closed loop). A task's failure
or timeout becomes a failed Sample and never cancels the others; ``stop()`` cancels what is in
flight, records it as ``cancelled`` and ends the run as interrupted.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel

from perfbench.clock import Clock, bind, default_clock, loop_clock, sleep_until
from perfbench.engine.collector import Collector
from perfbench.engine.deadline import deadline_of
from perfbench.engine.limiter import Limiter
from perfbench.engine.monitor import ClientMonitor
from perfbench.engine.resume import Resume, TaskKey
from perfbench.engine.share import Share
from perfbench.http.redact import Redactor, environment_secrets
from perfbench.load import Adaptive, Rate, stages
from perfbench.load.aimd import MAX_HOLD_S, Aimd
from perfbench.load.arrivals import schedule
from perfbench.sample import Phase, Sample
from perfbench.spec import Plan
from perfbench.stats import histogram
from perfbench.store.recorder import Recorder
from perfbench.suite import Case, Suite
from perfbench.targets import Target
from perfbench.task import Task


@dataclass(frozen=True)
class Outcome:
    interrupted: bool
    started: float  # on the runner's clock
    finished: float


PassHook = Callable[[Phase, int, int], None]
# Called at the start of every pass (worker processes wait here for the parent's go); returns
# the pass's start time on the runner's clock, shared by every worker's open-loop schedule.
PassGate = Callable[[Phase, int], Awaitable[float | None]]
# A 429 at (run time), asking (s) or None, and whether it said a per-minute budget was spent.
Refusals = Callable[[float, float | None, bool], None]


class Runner:
    """Runs a plan's passes in this process. In a worker process (``--workers``) it runs its
    ``share`` of every pass: closed loop, tasks in proportion to its share of the concurrency;
    open loop, every count-th arrival (interleaved schedules); both dealt by the case's place
    in the suite + the iteration. ``origin`` is then the parent's t0, so every sample shares
    one timeline; ``go`` waits for the parent's go before each pass; and with adaptive load the
    runner is a ``follower`` of the parent's one AIMD controller (``set_limit``), which reacts
    to every worker's 429s."""

    def __init__(
        self,
        suite: Suite,
        target: Target,
        plan: Plan,
        recorder: Recorder,
        *,
        clock: Clock = default_clock,
        on_pass: PassHook | None = None,
        resume: Resume | None = None,
        share: Share | None = None,
        origin: float | None = None,
        go: PassGate | None = None,
        follower: bool = False,
        refusals: Refusals | None = None,
        max_wait_s: float = MAX_HOLD_S,
    ) -> None:
        self.suite, self.target, self.plan, self.recorder = suite, target, plan, recorder
        self.clock = clock
        self.on_pass = on_pass
        self.resume = resume or Resume()
        self.share = share or Share()
        self.origin, self.go, self.follower = origin, go, follower
        # Adaptive: each 429 answer, as it arrives: this runner's AIMD hears it, or (a worker
        # process) the parent's, through ``refusals``.
        adaptive = isinstance(plan.load, Adaptive)
        self._refusals = (refusals if follower else self._refused) if adaptive else None
        self.concurrency = self.share.split(plan.concurrency)
        self.in_flight = 0
        self._scope: anyio.CancelScope | None = None  # made inside the event loop, by run()
        self._stopped = False
        self._done = 0
        self.t0 = 0.0
        shape = plan.load
        self.aimd = Aimd(shape, max_wait_s) if isinstance(shape, Adaptive) else None
        self._limiter: Limiter | None = None
        self._hold = float("-inf")
        self._timed: tuple[float, int] | None = None  # a timed loop's first measured pass: when
        self.monitor: ClientMonitor | None = None  # made by run(), on the run's clock
        self.collector = Collector()
        self._scrub = scrubber(target)

    def limit(self) -> int | None:
        """The adaptive limit now (None: the load is not adaptive)."""
        return self.aimd.limit if self.aimd is not None else None

    def tasks_in_flight(self) -> int:
        """Tasks running now (the live view's "in flight")."""
        return self.in_flight

    def client_summary(self) -> dict[str, Any] | None:
        """How hard the client worked (loop lag, CPU): summary.json's ``client``."""
        return self.monitor.summary() if self.monitor is not None else None

    def stop(self) -> None:
        """Cancel the run: tasks in flight are recorded as cancelled, nothing new starts."""
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> Outcome:
        self.clock = bind(self.clock)
        offset = self.resume.clock_offset
        self.t0 = self.origin if self.origin is not None else self.clock() - offset
        if self.aimd is not None:
            limit = self.share.split(self.aimd.limit) if self.follower else self.aimd.limit
            self._limiter = Limiter(limit)
        self.monitor = ClientMonitor(self.clock)
        if self._per_case() > histogram.EXACT:  # the statistics will record in batches
            histogram.prepare()
        self.collector.pause()
        try:
            await self._passes()
        finally:
            self.collector.restore()
        return Outcome(self._stopped, self.t0, self.clock())

    @functools.cached_property
    def _places(self) -> dict[str, int]:
        """Each case's place in the suite (what deals tasks to worker processes); made when
        first asked for, from the ids: a streamed suite's cases are not made for it."""
        return {case_id: k for k, case_id in enumerate(self.suite.ids())}

    def _per_case(self) -> int:
        """The most tasks of one case a pass can give this process's statistics."""
        plan, suite = self.plan, self.suite
        if isinstance(plan.load, Rate):
            cases = max(1, len(suite.cases))
            return math.ceil(plan.load.count(suite.per_pass(plan.repeat)) / cases) * suite.heaviest
        if plan.pass_seconds("measured") is not None:
            return histogram.EXACT + 1  # as many as the time allows: perhaps past it
        return plan.repeat * suite.heaviest

    async def _passes(self) -> None:
        assert self.monitor is not None
        with anyio.CancelScope() as self._scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.monitor.watch)
                for phase, index in self.plan.passes():
                    if self._stopped:
                        break
                    await self._pass(phase, index)
                tg.cancel_scope.cancel()  # the watcher

    async def _pass(self, phase: Phase, index: int) -> None:
        if self.monitor is not None:
            if phase == "measured":
                self.monitor.resume()
            else:
                self.monitor.pause()
        self.collector.pass_starting()  # before the gate: workers start a pass together
        base = await self.go(phase, index) if self.go is not None else None
        if self._stopped or (phase, index) in self.resume.whole_passes:
            self.recorder.pass_finished(phase, index)
            return
        todo = self.todo(phase, index)
        if not todo:  # measured before an interruption: nothing left in this pass
            self.recorder.pass_finished(phase, index)
            return
        seconds = self.plan.pass_seconds(phase)
        if self.on_pass is not None:
            self.on_pass(
                phase, index, 0 if seconds is not None else pass_size(self.plan, len(todo))
            )
        try:
            if isinstance(self.plan.load, Rate):
                await self._open_loop(self.plan.load, todo, phase, index, base)
            else:
                await self._closed_loop(todo, phase, index, base, seconds)
        finally:
            if self.monitor is not None:
                self.monitor.pause()  # the pass's statistics are not loop lag
            self.recorder.pass_finished(phase, index)
            self.collector.pass_ended()

    async def _closed_loop(
        self,
        todo: Todo,
        phase: Phase,
        index: int,
        base: float | None,
        seconds: float | None,
    ) -> None:
        """The pass's tasks pulled by its slots from one queue; timed (``seconds``), the queue
        cycles over the suite and runs dry when the time is up."""
        top = self.aimd.shape.maximum if self.aimd else 0
        workers = self.share.split(top) if self.aimd else self.concurrency
        tasks: Iterator[tuple[Case, int]] = iter(todo)
        staged = self.plan.stages if phase == "measured" else None
        if staged is not None and seconds is not None:
            began = self.clock() if base is None else base
            tasks = _until(self.clock, began + seconds, _rounds(self.suite))
            mine = self._mine(self.plan.concurrency)
            await self._staged(staged, (t for t in tasks if mine(*t)), phase, index, began)
            return
        if seconds is not None:
            tasks = _until(self.clock, self._timed_end(index, seconds, base), _rounds(self.suite))
        else:
            workers = min(workers, len(todo))
        mine = self._mine(len(todo) if seconds is None else self.plan.concurrency)
        queue = (task for task in tasks if mine(*task))
        starts = self._slot_starts(workers, base)
        async with anyio.create_task_group() as tg:
            for at in starts:
                tg.start_soon(self._worker, queue, phase, index, at)

    async def _staged(
        self,
        staged: stages.Stages,
        queue: Iterator[tuple[Case, int]],
        phase: Phase,
        index: int,
        began: float,
    ) -> None:
        """A pass under ramping stages: global slot k works while the target is above k."""
        share = self.share
        slots = [n * share.count + share.index for n in range(share.split(stages.peak(staged)))]
        async with anyio.create_task_group() as tg:
            for slot in slots:
                tg.start_soon(self._stage_slot, staged, slot, queue, phase, index, began)

    async def _stage_slot(
        self,
        staged: stages.Stages,
        slot: int,
        queue: Iterator[tuple[Case, int]],
        phase: Phase,
        index: int,
        began: float,
    ) -> None:
        while True:
            wake = stages.next_active(staged, slot, self.clock() - began)
            if wake is None:
                return
            if began + wake > self.clock():
                await sleep_until(self.clock, began + wake)
                continue
            task = next(queue, None)
            if task is None:
                return
            await self._one_shot(task[0], phase, index, task[1], None)
            await self._fair_share()

    def _timed_end(self, index: int, seconds: float, base: float | None) -> float:
        """When a timed pass stops starting tasks: the k-th measured pass of this session at
        k × its share after the first one began, so that the time between passes (their
        statistics) comes out of the next pass, and the runs together last the duration;
        resumed, the run's first pass counts, so a pass run again is as long as it was."""
        now = self.clock() if base is None else base
        if self._timed is None:
            self._timed = (now, index)
            first = self.resume.timed_from  # resumed: when the run's first pass began
            if first is not None:
                # Unstopped, this pass began where the samples kept end (clock_offset): it is
                # as long again, whatever this process took to get here. Not when that leaves
                # it no time: passes `run --runs auto` adds, their shares counted anew.
                began = now - (self.resume.clock_offset - first)
                if began + (index + 1) * seconds > now:
                    self._timed = (began, 0)
        began, first = self._timed
        return began + (index - first + 1) * seconds

    def _slot_starts(self, slots: int, base: float | None) -> list[float]:
        """When each of this process's closed-loop slots starts (``--ramp-up``): slot i is
        global slot i·count + at of the plan's concurrency, so the workers' starts interleave
        and together start one slot every ramp/concurrency seconds."""
        ramp = 0.0 if self.aimd is not None else self.plan.ramp_seconds()
        begin = self.clock() if base is None else base
        if ramp <= 0:
            return [begin] * slots
        step = ramp / max(1, self.plan.concurrency)
        return [begin + offset for offset in self.share.slot_offsets(slots, step)]

    def todo(self, phase: Phase, index: int) -> Todo:
        return todo(self.suite, self.plan, self.resume.done, phase, index)

    def _mine(self, n: int) -> Callable[[Case, int], bool]:
        """Whether a task (case, iteration) of a closed-loop pass of ``n`` is this worker's:
        its share of the global slots, and tasks in proportion (``Share.owns``)."""
        share = self.share
        if share.whole:
            return lambda case, i: True
        # Adaptive: the limit is split evenly, so are the tasks.
        slots = share.count if self.aimd is not None else max(1, min(self.plan.concurrency, n))
        place = self._places
        return lambda case, i: share.owns(place[case.id], i, slots)

    async def _open_loop(
        self,
        rate: Rate,
        todo: Todo,
        phase: Phase,
        index: int,
        base: float | None = None,
    ) -> None:
        """Start each task at its scheduled time, whatever is in flight (no coordinated
        omission): a task that could not start because of ``max_in_flight`` is recorded as
        dropped; how late each one started is on its sample (start − scheduled)."""
        count = rate.count(len(todo))
        offsets = (
            list(rate.trace)
            if rate.trace is not None
            else schedule(rate.per_second, rate.arrival, count, f"{self.plan.seed}|{phase}|{index}")
        )
        seen: dict[str, int] = {}
        base = self.clock() if base is None else base
        at, workers = self.share.index, self.share.count
        cap = None if rate.max_in_flight is None else max(1, self.share.split(rate.max_in_flight))
        async with anyio.create_task_group() as tg:
            # Read again each round (not itertools.cycle, which keeps a copy of every task):
            # a streamed suite's cases are made again, never all held.
            again = itertools.chain.from_iterable(itertools.repeat(todo))
            for (case, _), offset in zip(again, offsets, strict=False):
                iteration = seen[case.id] = seen.get(case.id, -1) + 1
                # Another worker's arrival (every worker numbers them all the same); dealt by
                # case + iteration as in a closed loop, so each worker's cases change per round.
                if workers > 1 and (self._places[case.id] + iteration) % workers != at:
                    continue
                intended = base + offset
                await sleep_until(self.clock, intended)
                if cap is not None and self.in_flight >= cap:
                    self._drop(case, phase, index, iteration, intended)
                    continue
                tg.start_soon(self._one_shot, case, phase, index, iteration, intended)

    def _drop(self, case: Case, phase: Phase, run: int, iteration: int, intended: float) -> None:
        task = Task(case, phase, run, iteration, self.plan.seed, self.clock, self.t0)
        task.scheduled = intended - self.t0
        task.begin()
        sample = task.sample(
            "dropped", error_kind="dropped", error="not started: max_in_flight tasks were in flight"
        )
        self._record(sample)

    async def _one_shot(
        self, case: Case, phase: Phase, run: int, iteration: int, intended: float | None
    ) -> None:
        """One task to its end or its timeout; ``intended``: its scheduled start (open loop)."""
        task = self._start(case, phase, run, iteration)
        if intended is not None:
            task.scheduled = intended - self.t0
        try:
            with anyio.move_on_after(case.timeout_s):
                self._finish(await self._attempt(task), task)
                return
            timeout = case.timeout_s
            self._finish(
                task.sample(
                    "timeout", error_kind="timeout", error=f"no result within {timeout:g} s"
                ),
                task,
            )
        except anyio.get_cancelled_exc_class():
            self._finish(task.sample("cancelled", error_kind="cancelled"), task)
            raise

    async def _worker(
        self, queue: Iterator[tuple[Case, int]], phase: Phase, index: int, start: float
    ) -> None:
        # One shared iterator feeds every worker: next() runs between awaits, so no lock needed.
        # One cancel scope serves as the timeout of many tasks (its deadline is moved per task):
        # entering and leaving a scope per task cost ~10 µs, a fifth of the overhead budget;
        # on asyncio one timer serves the scope (engine/deadline), not one armed per task.
        deadline_clock = loop_clock()  # cancel-scope deadlines are on the event loop's clock
        task: Task | None = None
        try:
            await sleep_until(self.clock, start)
            while True:
                with anyio.CancelScope() as limit, deadline_of(limit) as deadline:
                    for case, iteration in queue:
                        if self._limiter is not None:  # adaptive: wait for a free slot
                            deadline.set(math.inf)  # no stale deadline while waiting here
                            await self._limiter.acquire()
                            await self._respect_hold()
                        try:
                            task = self._start(case, phase, index, iteration)
                            deadline.set(deadline_clock() + case.timeout_s)
                            sample = await self._attempt(task)
                            # The old deadline is left in place until the next task sets its
                            # own (one timer reset per task, not two): if it fires in between,
                            # ``task`` is None and the loop just carries on.
                            done, task = task, None
                            self._finish(sample, done)
                        finally:
                            if self._limiter is not None:
                                self._limiter.release()
                        await self._fair_share()
                    return
                if task is not None:  # the deadline fired: that task timed out
                    timeout = task.case.timeout_s
                    self._finish(
                        task.sample(
                            "timeout", error_kind="timeout", error=f"no result within {timeout:g} s"
                        ),
                        task,
                    )
                    task = None
        except anyio.get_cancelled_exc_class():
            if task is not None:
                self._finish(task.sample("cancelled", error_kind="cancelled"), task)
            raise

    async def _respect_hold(self) -> None:
        """After a rate-limit episode, start nothing until the server's wait is over."""
        if self.aimd is not None:
            hold = self._hold if self.follower else self.aimd.hold_until
            await sleep_until(self.clock, self.t0 + hold)

    def _start(self, case: Case, phase: Phase, run: int, iteration: int) -> Task:
        task = Task(case, phase, run, iteration, self.plan.seed, self.clock, self.t0)
        self.in_flight += 1
        task.concurrency = self.in_flight
        task.on_refusal = self._refusals
        task.begin()
        return task

    def _record(self, sample: Sample) -> None:
        if self._scrub is not None:
            self._scrub(sample)
        self.recorder.record(sample)

    def _finish(self, sample: Sample, task: Task) -> None:
        self.in_flight -= 1
        self._record(sample)
        self.collector.task_done()
        if self.aimd is None or sample.status == "cancelled":
            return
        if self.follower:  # the parent's controller decides; tell it of 429s not yet told
            if self._refusals is not None:
                for _ in range(sample.throttled - task.told):
                    self._refusals(sample.end, sample.retry_after, False)
            return
        self._limit(self.aimd.observe(sample, heard=task.told))

    def _refused(self, at: float, retry_after: float | None, window: bool) -> None:
        """A 429 arrived in one of this runner's tasks (the leader's AIMD hears it now)."""
        assert self.aimd is not None
        self._limit(self.aimd.refused(at, retry_after, window))

    def _limit(self, limit: int) -> None:
        if self._limiter is not None:
            self._limiter.set(limit)

    def set_limit(self, limit: int, hold_until: float) -> None:
        """A follower's share of the coordinated limit, and the parent's hold (run time)."""
        self._hold = hold_until
        if self._limiter is not None:
            self._limiter.set(limit)

    async def _attempt(self, task: Task) -> Sample:
        try:
            return await self.target.run(task)
        except Exception as exc:  # a target bug must not end the run; it is shown as a failure
            kind = f"unhandled:{type(exc).__name__}"
            return task.sample("error", error_kind=kind, error=str(exc)[:500])

    async def _fair_share(self) -> None:
        # A zero-latency target never yields; yielding every few tasks keeps the run
        # cancellable (Ctrl-C) and the workers fair without a ~4 µs checkpoint per task.
        self._done += 1
        if self._done % 16 == 0:
            await anyio.lowlevel.checkpoint()


@dataclass(frozen=True)
class Todo:
    """A pass's tasks (every worker's), less those a resumed run already has: round by round
    (each case once, then each again), so the mix in flight stays the suite's all through the
    pass, and a pass cut short has measured every case, not the first few. Made as they are
    read, and read again from the start each time: a streamed suite's first task goes out
    before its last case is made, and no list of 10^5 tasks is held."""

    suite: Suite
    plan: Plan
    skip: Collection[TaskKey]
    phase: Phase
    index: int

    def __iter__(self) -> Iterator[tuple[Case, int]]:
        repeat, skip, phase, index = self.plan.repeat, self.skip, self.phase, self.index
        for i in range(repeat * self.suite.heaviest):
            for c in self.suite.cases:
                if i < c.weight * repeat and (phase, index, c.id, i) not in skip:
                    yield c, i

    def __len__(self) -> int:
        """A streamed suite's counted without making a case: the pass's tasks less those a
        resumed run has (of the same digest: its keys are the suite's, each case's
        iterations below ``repeat``); a suite held, by reading it."""
        if self.suite.streamed is None:
            return sum(1 for _ in self)
        repeat, phase, index = self.plan.repeat, self.phase, self.index
        done = sum(1 for p, i, _, k in self.skip if p == phase and i == index and k < repeat)
        return self.suite.per_pass(repeat) - done


def todo(suite: Suite, plan: Plan, skip: Collection[TaskKey], phase: Phase, index: int) -> Todo:
    """A pass's tasks (``Todo``)."""
    return Todo(suite, plan, skip, phase, index)


def pass_size(plan: Plan, todo: int) -> int:
    """The tasks a pass starts: its ``todo`` (cases × repeat), or an open loop's arrivals (a
    15 s run at 5/s starts ~75, and its header had said "16 tasks")."""
    return plan.load.count(todo) if isinstance(plan.load, Rate) else todo


def _rounds(suite: Suite) -> Iterator[tuple[Case, int]]:
    """A timed pass's tasks: every case (weight times), then again, without end."""
    for round_ in itertools.count():
        for case in suite.cases:
            for k in range(case.weight):
                yield case, round_ * case.weight + k


def _until(
    clock: Clock, end: float, tasks: Iterator[tuple[Case, int]]
) -> Iterator[tuple[Case, int]]:
    """``tasks`` until ``clock`` reaches ``end``: the next task is not started after it."""
    for task in tasks:
        if clock() >= end:
            return
        yield task


def task_keys(suite: Suite, plan: Plan) -> Iterator[TaskKey]:
    """Every task a complete run executes, as Sample keys (phase, run, case, iteration)."""
    for (phase, run), case in itertools.product(plan.passes(), suite.cases):
        for it in range(case.weight * plan.repeat):
            yield (phase, run, case.id, it)


_NAMES_KEPT = 10_000  # step names already scrubbed (tools and models repeat: one check each)


def scrubber(target: Target) -> Callable[[Sample], None] | None:
    """The one redaction pass over every sample before it is recorded (http/redact.py): the
    texts a target took from the wire (error, model name, step names) lose any run of the
    target's or the environment's secrets. None when there are none to mask."""
    redact = Redactor((*target.secrets, *environment_secrets()))
    if not redact:
        return None
    names: dict[str, str] = {}

    def scrub(sample: Sample) -> None:
        if sample.error:
            sample.error = redact(sample.error)
        if sample.model_served:
            sample.model_served = redact(sample.model_served)
        for step in sample.steps:
            name = names.get(step.name)
            if name is None:
                if len(names) >= _NAMES_KEPT:
                    names.clear()
                name = names[step.name] = redact(step.name)
            step.name = name
            if step.model_served:  # the wire's text, as the sample's
                step.model_served = redact(step.model_served)

    return scrub
