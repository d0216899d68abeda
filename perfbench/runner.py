"""The runner: phases, passes, concurrency, timeouts and cancellation.

A run is ``warmup`` passes over the suite, then ``runs`` measured passes; in every pass each
case executes ``repeat`` times. Passes run one after another (each has its own window), and
inside a pass ``concurrency`` workers pull tasks from one queue (closed loop). A task's failure
or timeout becomes a failed Sample and never cancels the others; ``stop()`` cancels what is in
flight, records it as ``cancelled`` and ends the run as interrupted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from perfbench.clock import Clock, bind, default_clock, loop_clock
from perfbench.recorder import Recorder
from perfbench.sample import Phase, Sample
from perfbench.suite import Case, Suite
from perfbench.targets import Target
from perfbench.task import Task


@dataclass(frozen=True)
class Plan:
    runs: int = 5
    warmup: int = 1
    repeat: int = 1
    concurrency: int = 1
    seed: int = 0

    def passes(self) -> list[tuple[Phase, int]]:
        warm: list[tuple[Phase, int]] = [("warmup", i) for i in range(self.warmup)]
        return warm + [("measured", i) for i in range(self.runs)]

    def tasks_per_pass(self, suite: Suite) -> int:
        return len(suite.cases) * self.repeat


@dataclass(frozen=True)
class Outcome:
    interrupted: bool
    started: float  # on the runner's clock
    finished: float


PassHook = Callable[[Phase, int, int], None]


class Runner:
    def __init__(
        self,
        suite: Suite,
        target: Target,
        plan: Plan,
        recorder: Recorder,
        *,
        clock: Clock = default_clock,
        on_pass: PassHook | None = None,
    ) -> None:
        self.suite, self.target, self.plan, self.recorder = suite, target, plan, recorder
        self.clock = clock
        self.on_pass = on_pass
        self.in_flight = 0
        self._scope: anyio.CancelScope | None = None  # made inside the event loop, by run()
        self._stopped = False
        self._done = 0
        self.t0 = 0.0

    def stop(self) -> None:
        """Cancel the run: tasks in flight are recorded as cancelled, nothing new starts."""
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> Outcome:
        self.clock = bind(self.clock)
        self.t0 = self.clock()
        with anyio.CancelScope() as self._scope:
            for phase, index in self.plan.passes():
                if self._stopped:
                    break
                await self._pass(phase, index)
        return Outcome(self._stopped, self.t0, self.clock())

    async def _pass(self, phase: Phase, index: int) -> None:
        todo = [(c, i) for c in self.suite.cases for i in range(self.plan.repeat)]
        if self.on_pass is not None:
            self.on_pass(phase, index, len(todo))
        queue = iter(todo)
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(self.plan.concurrency, len(todo))):
                    tg.start_soon(self._worker, queue, phase, index)
        finally:
            self.recorder.pass_finished(phase, index)

    async def _worker(self, queue: Iterator[tuple[Case, int]], phase: Phase, index: int) -> None:
        # One shared iterator feeds every worker: next() runs between awaits, so no lock needed.
        # One cancel scope serves as the timeout of many tasks (its deadline is moved per task):
        # entering and leaving a scope per task cost ~10 µs, a fifth of the overhead budget.
        deadline_clock = loop_clock()  # cancel-scope deadlines are on the event loop's clock
        task: Task | None = None
        try:
            while True:
                with anyio.CancelScope() as limit:
                    for case, iteration in queue:
                        task = self._start(case, phase, index, iteration)
                        limit.deadline = deadline_clock() + case.timeout_s
                        sample = await self._attempt(task)
                        limit.deadline = math.inf
                        task = None
                        self._finish(sample)
                        await self._fair_share()
                    return
                if task is not None:  # the deadline fired: that task timed out
                    timeout = task.case.timeout_s
                    self._finish(
                        task.sample(
                            "timeout", error_kind="timeout", error=f"no result within {timeout:g} s"
                        )
                    )
                    task = None
        except anyio.get_cancelled_exc_class():
            if task is not None:
                self._finish(task.sample("cancelled", error_kind="cancelled"))
            raise

    def _start(self, case: Case, phase: Phase, run: int, iteration: int) -> Task:
        task = Task(case, phase, run, iteration, self.plan.seed, self.clock, self.t0)
        self.in_flight += 1
        task.concurrency = self.in_flight
        task.begin()
        return task

    def _finish(self, sample: Sample) -> None:
        self.in_flight -= 1
        self.recorder.record(sample)

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


def task_keys(suite: Suite, plan: Plan) -> Iterator[tuple[str, int, str, int]]:
    """Every task a complete run executes, as Sample keys (phase, run, case, iteration)."""
    for (phase, run), case, it in itertools.product(plan.passes(), suite.cases, range(plan.repeat)):
        yield (phase, run, case.id, it)
