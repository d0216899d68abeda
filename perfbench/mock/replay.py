"""A mock profile's ``replay:``: the mock serves a recording's answers (``perfbench run
--record``) instead of simulating, so a CI gate runs on real model behaviour with no key.

A call is found by its case and its number in the task (the ``x-perfbench-case`` and
``x-perfbench-step`` headers perfbench's proxy sends a mock): the recorded call of the same
task (phase, run, iteration) when there is one, else one of the case's by the task's number.
The answer is sent as it was recorded: status, content type, and the body in the recorded
chunks, each at its recorded time after the request's arrival (``timing: recorded``), or at
times drawn from lognormal distributions fitted to the recording's first chunks, second
chunks (the time to first token) and later gaps (``timing: fitted``: the same shape of delay
without the recorded run's particular stalls), seeded by the call's key. A call the recording
lacks gets a 404 whose error type is ``replay_miss``: a classified failure, never a made-up
answer."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from perfbench.apis.recording import Call, read

Timing = Literal["recorded", "fitted"]
_PHASES = {"warmup": 0, "measured": 1}


@dataclass(frozen=True)
class Answer:
    """What to send for one call: status, headers, and the body's chunks with their due
    times after the request's arrival."""

    status: int
    headers: dict[str, str]
    chunks: tuple[bytes, ...]
    due: tuple[float, ...]

    @property
    def streamed(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")


class Replay:
    def __init__(self, path: Path, timing: Timing = "recorded") -> None:
        self.path, self.timing = path, timing
        _, calls = read(path)
        index: dict[tuple[str, int], list[Call]] = {}
        order = sorted(calls, key=lambda c: (_PHASES.get(c.phase, 2), c.run, c.iteration))
        for call in order:
            index.setdefault((call.case, call.step), []).append(call)
        self._index = index
        self._exact = {(c.case, c.phase, c.run, c.iteration, c.step): c for c in calls}
        self._fit = _Fit.of(calls) if timing == "fitted" else None

    def answer(self, headers: Mapping[str, str]) -> Answer | str:
        """The recorded answer for the call ``headers`` name, or why there is none."""
        case = headers.get("x-perfbench-case")
        step, iteration = (
            _int(headers.get("x-perfbench-step")),
            _int(headers.get("x-perfbench-iteration")),
        )
        if case is None or step is None:
            return (
                "the request does not say which case and call it is (x-perfbench-case, "
                "x-perfbench-step): a replaying mock answers perfbench's proxy (cmd: targets)"
            )
        found = self._index.get((case, step))
        if not found:
            return f"the recording {self.path.name} has no call {step} of case {case!r}"
        # The same task's call when the recording has it (a replay of the recorded plan);
        # else one of the case's, by the task's number (another plan: more runs, repeats).
        phase, run = headers.get("x-perfbench-phase", ""), _int(headers.get("x-perfbench-run"))
        call = self._exact.get((case, phase, run or 0, iteration or 0, step))
        if call is None:
            number = (run or 0) * 1000 + (iteration or 0)
            call = found[number % len(found)]
        chunks = tuple(text.encode() for _, text in call.chunks)
        due = tuple(at for at, _ in call.chunks)
        if self._fit is not None:
            due = self._fit.draw(len(chunks), random.Random(headers.get("x-perfbench-key", "")))
        return Answer(call.status, dict(call.headers), chunks, due)


@dataclass(frozen=True)
class _Fit:
    """Lognormal fits (mean and standard deviation of the logs) of every recorded call's
    first chunk's time, of the gap to its second (a stream's head goes out with the headers
    and its first token later: that gap is the time to first token), and of its later gaps."""

    first: tuple[float, float]
    second: tuple[float, float]
    gap: tuple[float, float]

    @classmethod
    def of(cls, calls: list[Call]) -> _Fit:
        times = [[at for at, _ in c.chunks] for c in calls]
        gaps = [[b - a for a, b in itertools.pairwise(t)] for t in times]
        return cls(
            _lognormal([t[0] for t in times if t]),
            _lognormal([g[0] for g in gaps if g]),
            _lognormal([x for g in gaps for x in g[1:]]),
        )

    def draw(self, n: int, rng: random.Random) -> tuple[float, ...]:
        out: list[float] = []
        at = 0.0
        for i in range(n):
            fit = self.first if i == 0 else self.second if i == 1 else self.gap
            at += rng.lognormvariate(*fit) if fit[0] > -math.inf else 0.0
            out.append(at)
        return tuple(out)


def _lognormal(values: list[float]) -> tuple[float, float]:
    logs = [math.log(v) for v in values if v > 0]
    if not logs:
        return (-math.inf, 0.0)  # nothing positive recorded: no delay
    return (statistics.fmean(logs), statistics.pstdev(logs))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
