"""Taking up an interrupted run: what is on disk already, read back from samples.jsonl.

Closed loop: every finished task is kept and not run again. Open loop: a pass is kept only
if every scheduled arrival of it is on disk; a pass cut short is measured again from its
start, since its schedule (and the load it put on the target) cannot be continued from the
middle. Either way the run's timeline continues after the last sample on disk, so per-run
windows stay ordered.

Bounded memory whatever the run's size: samples.jsonl is read line by line, each kept sample
goes to the caller (the run's statistics) and to the rewritten file as it is read, and the
tasks done are bits (``store.TaskSet``). Holding the samples, a resume of a 10^6-sample run
needed 1.8 GB."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from perfbench import store
from perfbench.load import Rate
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.store import TaskKey, TaskSet
from perfbench.suite import Suite

__all__ = ["Resume", "TaskKey"]


@dataclass(frozen=True)
class Resume:
    done: TaskSet = field(default_factory=TaskSet)  # tasks already measured
    whole_passes: frozenset[tuple[str, int]] = frozenset()  # open loop: passes already measured
    clock_offset: float = 0.0  # the resumed run's clock continues from here

    @classmethod
    def read(
        cls, run_dir: Path, suite: Suite, plan: Plan, fold: Callable[[Sample], None]
    ) -> Resume:
        """What ``run_dir`` has measured; each sample kept is given to ``fold`` in file order
        (samples.jsonl is rewritten with them: a torn last line and repeated tasks go; open
        loop, passes that did not finish). A task cancelled in flight runs again; its
        cancelled line stays only if the server answered it with 429s or retries, which the
        interrupt must not erase (a level resumed after its tasks were stopped in backoff
        showed 0.00 429s a task, 0.25 whole)."""
        cases = [c.id for c in suite.cases]
        passes = _pass_filter(run_dir, cases, suite, plan)
        found = _Found(TaskSet(cases))

        def kept() -> Iterator[Sample]:
            for s in _candidates(run_dir, cases):
                if passes is None or (s.phase, s.run) in passes:
                    fold(s)
                    found.add(s)
                    yield s

        store.rewrite_samples(run_dir, kept())
        return cls(
            done=found.done,
            whole_passes=frozenset(found.passes) if passes is not None else frozenset(),
            clock_offset=found.end if found.end is not None else 0.0,
        )


@dataclass
class _Found:
    """What the samples kept add up to, folded as they are read."""

    done: TaskSet
    passes: set[tuple[str, int]] = field(default_factory=set)
    end: float | None = None  # the last finite end

    def add(self, s: Sample) -> None:
        self.passes.add((s.phase, s.run))
        if s.status != "cancelled":
            self.done.add(s.key)
        if math.isfinite(s.end) and (self.end is None or s.end > self.end):
            self.end = s.end


def _candidates(run_dir: Path, cases: list[str]) -> Iterator[Sample]:
    """Each task once, less the cancelled attempts not worth keeping."""
    return (s for s in store.unique_samples(run_dir, cases) if _worth_keeping(s))


def _worth_keeping(sample: Sample) -> bool:
    return sample.status != "cancelled" or bool(sample.throttled or sample.retries)


def _pass_filter(
    run_dir: Path, cases: list[str], suite: Suite, plan: Plan
) -> frozenset[tuple[str, int]] | None:
    """The passes to keep (None: every one, a closed loop's tasks are kept one by one). It
    takes a first reading of the file, counting per pass."""
    open_loop = isinstance(plan.load, Rate)
    if not open_loop and plan.pass_seconds("measured") is None:
        return None
    counts: Counter[tuple[str, int]] = Counter()
    for s in _candidates(run_dir, cases):
        counts[s.phase, s.run] += s.status != "cancelled"
    if isinstance(plan.load, Rate):
        return _whole_passes(counts, suite, plan, plan.load)
    return _ended_passes(counts, plan)


def _ended_passes(counts: Counter[tuple[str, int]], plan: Plan) -> frozenset[tuple[str, int]]:
    """A timed closed loop's passes that a later one followed (passes run in order): the last
    one begun was cut short, and runs again whole."""
    order: dict[tuple[str, int], int] = {key: n for n, key in enumerate(plan.passes())}
    last = max((order[key] for key in counts), default=-1)
    return frozenset(key for key in counts if order[key] < last)


def _whole_passes(
    counts: Counter[tuple[str, int]], suite: Suite, plan: Plan, load: Rate
) -> frozenset[tuple[str, int]]:
    per_pass = load.count(suite.per_pass(plan.repeat))
    return frozenset(key for key, seen in counts.items() if seen >= per_pass)
