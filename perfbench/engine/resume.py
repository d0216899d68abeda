"""Taking up an interrupted run: what is on disk already, read back from samples.jsonl.

Closed loop: every finished task is kept and not run again. Open loop: a pass is kept only
if every scheduled arrival of it is on disk; a pass cut short is measured again from its
start, since its schedule (and the load it put on the target) cannot be continued from the
middle. Either way the run's timeline continues after the last sample on disk, so per-run
windows stay ordered."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfbench import store
from perfbench.load import Rate
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.suite import Suite

TaskKey = tuple[str, int, str, int]  # Sample.key: phase, run, case, iteration


@dataclass(frozen=True)
class Resume:
    done: frozenset[TaskKey] = frozenset()  # tasks already measured
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
    def read(cls, run_dir: Path, suite: Suite, plan: Plan) -> tuple[Resume, list[Sample]]:
        """What ``run_dir`` has measured, and the samples kept (samples.jsonl is rewritten
        with them: a torn last line and repeated tasks go; open loop, passes that did not
        finish). A task cancelled in flight runs again; its cancelled line stays only if the
        server answered it with 429s or retries, which the interrupt must not erase (a level
        resumed after its tasks were stopped in backoff showed 0.00 429s a task, 0.25 whole)."""
        read = [s for s in store.unique(store.read_samples(run_dir)) if _worth_keeping(s)]
        open_loop = isinstance(plan.load, Rate)
        timed = plan.pass_seconds("measured") is not None
        kept = read
        if open_loop:
            kept = _whole_passes(read, suite, plan)
        elif timed:
            kept = _ended_passes(read, plan)
        store.rewrite_samples(run_dir, kept)
        finished = [s for s in kept if s.status != "cancelled"]
        resume = cls(
            done=frozenset(s.key for s in finished),
            whole_passes=(
                frozenset((s.phase, s.run) for s in kept) if open_loop or timed else frozenset()
            ),
            clock_offset=max((s.end for s in kept if math.isfinite(s.end)), default=0.0),
            timed_from=_first_start(kept) if timed and not open_loop else None,
            **_redone(read, kept),
        )
        return resume, kept

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


def _worth_keeping(sample: Sample) -> bool:
    return sample.status != "cancelled" or bool(sample.throttled or sample.retries)


def _redone(read: list[Sample], kept: list[Sample]) -> dict[str, Any]:
    """The passes ``read`` has and ``kept`` does not, in order, and their finished tasks."""
    gone = {(s.phase, s.run) for s in read} - {(s.phase, s.run) for s in kept}
    dropped = sum((s.phase, s.run) in gone and s.status != "cancelled" for s in read)
    return {
        "redone": tuple(sorted(gone, key=lambda p: (p[0] != "warmup", p[1]))),
        "dropped": dropped,
    }


def _first_start(samples: list[Sample]) -> float | None:
    """When the first measured pass began, if it is kept: its first task started then."""
    return min((s.start for s in samples if s.phase == "measured" and s.run == 0), default=None)


def _ended_passes(samples: list[Sample], plan: Plan) -> list[Sample]:
    """A timed closed loop's passes that a later one followed (passes run in order): the last
    one begun was cut short, and runs again whole."""
    order = {key: n for n, key in enumerate(plan.passes())}
    last = max((order[s.phase, s.run] for s in samples), default=-1)
    return [s for s in samples if order[s.phase, s.run] < last]


def _whole_passes(samples: list[Sample], suite: Suite, plan: Plan) -> list[Sample]:
    assert isinstance(plan.load, Rate)
    per_pass = plan.load.count(suite.per_pass(plan.repeat))
    seen = Counter((s.phase, s.run) for s in samples if s.status != "cancelled")
    return [s for s in samples if seen[s.phase, s.run] >= per_pass]
