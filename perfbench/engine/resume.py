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
from typing import Any

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
    # A timed closed loop (--duration): when its first measured pass began, on that clock, so
    # that the passes run again end when they would have (``Runner._timed_end``).
    timed_from: float | None = None
    # Passes bounded by time or by a schedule that a stop cut short, measured again whole, and
    # how many finished tasks of theirs were dropped (``note`` says so as the run resumes).
    redone: tuple[tuple[str, int], ...] = ()
    dropped: int = 0

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
        cases = list(suite.ids())
        counts = _pass_counts(run_dir, cases, plan)
        passes = _pass_filter(counts, suite, plan) if counts is not None else None
        found = _Found(TaskSet(cases))

        def kept() -> Iterator[Sample]:
            for s in _candidates(run_dir, cases):
                if passes is None or (s.phase, s.run) in passes:
                    fold(s)
                    found.add(s)
                    yield s

        store.rewrite_samples(run_dir, kept())
        timed = not isinstance(plan.load, Rate) and plan.pass_seconds("measured") is not None
        return cls(
            done=found.done,
            whole_passes=frozenset(found.passes) if passes is not None else frozenset(),
            clock_offset=found.end if found.end is not None else 0.0,
            timed_from=found.first_start if timed else None,
            **_redone(counts or Counter(), passes),
        )

    def note(self, plan: Plan) -> str | None:
        """One line for a resumed run that measures a pass again whole (None: it continues
        where it stopped)."""
        if not self.redone:
            return None
        passes = ", ".join(f"{'run' if p == 'measured' else p} {i + 1}" for p, i in self.redone)
        if isinstance(plan.load, Rate):
            why = "an open-loop pass keeps its schedule"
        elif plan.stages is not None:
            why = "--stages ramp from their start"
        else:
            why = "a --duration pass is time, not a task list"
        return (
            f"Resuming: {passes} was cut short and runs again whole ({self.dropped} finished "
            f"tasks dropped): {why}."
        )


@dataclass
class _Found:
    """What the samples kept add up to, folded as they are read."""

    done: TaskSet
    passes: set[tuple[str, int]] = field(default_factory=set)
    end: float | None = None  # the last finite end
    first_start: float | None = None  # when the first measured pass began (its first task)

    def add(self, s: Sample) -> None:
        self.passes.add((s.phase, s.run))
        first = s.phase == "measured" and s.run == 0
        if first and (self.first_start is None or s.start < self.first_start):
            self.first_start = s.start
        if s.status != "cancelled":
            self.done.add(s.key)
        if math.isfinite(s.end) and (self.end is None or s.end > self.end):
            self.end = s.end


def _candidates(run_dir: Path, cases: list[str]) -> Iterator[Sample]:
    """Each task once, less the cancelled attempts not worth keeping."""
    return (s for s in store.unique_samples(run_dir, cases) if _worth_keeping(s))


def _worth_keeping(sample: Sample) -> bool:
    return sample.status != "cancelled" or bool(sample.throttled or sample.retries)


def _redone(
    counts: Counter[tuple[str, int]], kept: frozenset[tuple[str, int]] | None
) -> dict[str, Any]:
    """The passes read and not kept, in order, and their finished tasks (``counts``)."""
    gone = set(counts) - kept if kept is not None else set()
    return {
        "redone": tuple(sorted(gone, key=lambda p: (p[0] != "warmup", p[1]))),
        "dropped": sum(counts[p] for p in gone),
    }


def _pass_counts(run_dir: Path, cases: list[str], plan: Plan) -> Counter[tuple[str, int]] | None:
    """Finished tasks per pass, from a first reading of the file; None for a closed loop by
    task count, whose tasks are kept one by one."""
    if not isinstance(plan.load, Rate) and plan.pass_seconds("measured") is None:
        return None
    counts: Counter[tuple[str, int]] = Counter()
    for s in _candidates(run_dir, cases):
        counts[s.phase, s.run] += s.status != "cancelled"
    return counts


def _pass_filter(
    counts: Counter[tuple[str, int]], suite: Suite, plan: Plan
) -> frozenset[tuple[str, int]]:
    """The passes to keep: an open loop's whole ones, a timed loop's ended ones."""
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
