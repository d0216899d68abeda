"""A task in flight: which case execution it is, and the trace its target fills in as it goes.

The runner creates the Task and owns it, so when a target times out or raises, the steps it had
already recorded are still there to go into the failed Sample."""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from perfbench.clock import Clock
from perfbench.sample import Phase, Sample, Status, Step, gap_counts
from perfbench.suite import Case

# What an error text taken from the wire may not keep: NUL and the other control characters
# but tab and newline (a decompressed body's binary, a terminal escape).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` with its control characters (but tab and newline) as U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


@dataclass(slots=True)
class Task:
    case: Case
    phase: Phase
    run: int
    iteration: int
    seed: int
    clock: Clock
    t0: float  # session origin on ``clock``; sample times are relative to it
    start: float = 0.0
    scheduled: float | None = None
    concurrency: int = 0
    steps: list[Step] = field(default_factory=list)
    ttfo: float | None = None
    tokens_estimated: bool = False
    tokenizer: str | None = None
    tokens_out_estimate: int | None = None
    tokens_cache_read: int | None = None
    tokens_cache_write: int | None = None
    tokens_reasoning: int | None = None
    model_served: str | None = None
    cost_reported: float | None = None
    http_status: int | None = None
    retries: int = 0
    throttled: int = 0
    retry_after: float | None = None
    # Told of each 429 answer as it arrives (the engine's adaptive controller), not at the end.
    on_refusal: Callable[[float, float | None, bool], None] | None = None
    told: int = 0  # 429s on_refusal was told of
    turn: int | None = None  # a multi-turn case: the turn being run, stamped on its steps
    _open: Step | None = None  # the step in progress, closed by a failed sample
    # A target's last word on its steps before the sample is made, however the task ended (an
    # answer, a timeout, a cancellation): a proxied agent's become its model calls and its own
    # time (targets/proxied.py). Called once, with the task's end.
    settle: Callable[[float], None] | None = None
    # Every gap between token-bearing chunks, all model calls: one append per chunk on the
    # hot path; summed and bucketed once, when the sample is made. Packed doubles, 8 bytes a
    # gap, not a float object and a pointer (32): a long stream has one per token.
    _gaps: array[float] = field(default_factory=lambda: array("d"))

    def begin(self) -> None:
        self.start = self.now()

    def now(self) -> float:
        return self.clock() - self.t0

    def time_left(self) -> float:
        """Seconds until the case's ``timeout_s`` ends this task."""
        return self.case.timeout_s - (self.now() - self.start)

    def refused(self, retry_after: float | None, window: bool = False) -> None:
        """A 429 answer arrived, asking to wait ``retry_after`` seconds (None: it did not say):
        counted on the task, and told to the engine now, whether or not a retry follows.
        ``window``: the answer said a per-minute budget (requests, tokens) was spent."""
        self.throttled += 1
        self.retry_after = retry_after
        if self.on_refusal is not None:
            self.told += 1
            self.on_refusal(self.now(), retry_after, window)

    def rng(self, stream: str = "") -> random.Random:
        """A generator derived from (seed, case, phase, run, iteration, stream) alone, so the same
        seed gives the same draws whatever the concurrency or scheduling order."""
        key = f"{self.seed}|{self.case.id}|{self.phase}|{self.run}|{self.iteration}|{stream}"
        return random.Random(int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest()))

    def model_call(self, name: str) -> ModelCall:
        step = Step(kind="model", name=name, start=self.now(), turn=self.turn)
        self.steps.append(step)
        self._open = step
        return ModelCall(self, step)

    @contextmanager
    def tool_call(self, name: str) -> Iterator[Step]:
        step = Step(kind="tool", name=name, start=self.now(), turn=self.turn)
        self.steps.append(step)
        self._open = step
        try:
            yield step
        except BaseException:
            step.status = "error"
            raise
        finally:
            step.duration = self.now() - step.start
            self._open = None

    def sample(
        self,
        status: Status = "ok",
        *,
        error_kind: str | None = None,
        error: str | None = None,
        expect_ok: bool | None = None,
        end: float | None = None,
    ) -> Sample:
        if self._open is not None and status != "ok":
            # The step the task was in when it timed out or was cancelled ends with it.
            self._open.duration = self.now() - self._open.start
            self._open.status = status
            self._open = None
        if self.settle is not None:
            settle, self.settle = self.settle, None
            settle(self.now() if end is None else end)
        models = tools = 0
        tokens_in = tokens_out = None
        first_ttft = None
        for step in self.steps:  # one pass: this runs once per task, on the hot path
            if step.kind != "model":
                tools += step.kind == "tool"  # not a command agent's own time ("agent")
                continue
            if not models:
                first_ttft = step.ttft
            models += 1
            if step.tokens_in is not None:
                tokens_in = (tokens_in or 0) + step.tokens_in
            if step.tokens_out is not None:
                tokens_out = (tokens_out or 0) + step.tokens_out
        gaps = self._gaps
        return Sample(
            phase=self.phase,
            run=self.run,
            case=self.case.id,
            iteration=self.iteration,
            language=self.case.language,
            tags=list(self.case.tags),
            start=self.start,
            end=self.now() if end is None else end,
            status=status,
            scheduled=self.scheduled,
            ttft=first_ttft,
            ttfo=self.ttfo,
            itl_mean=math.fsum(gaps) / len(gaps) if gaps else None,
            itl_max=max(gaps) if gaps else None,
            itl_gaps=gap_counts(gaps) if gaps else None,
            steps=self.steps,
            model_calls=models,
            tool_calls=tools,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            tokens_estimated=self.tokens_estimated,
            tokenizer=self.tokenizer,
            tokens_out_estimate=self.tokens_out_estimate,
            tokens_cache_read=self.tokens_cache_read,
            tokens_cache_write=self.tokens_cache_write,
            tokens_reasoning=self.tokens_reasoning,
            model_served=self.model_served,
            cost_reported=self.cost_reported,
            input_chars=len(self.case.system or "") + len(self.case.prompt_text()),
            expect_ok=expect_ok,
            error_kind=error_kind,
            error=printable(error) if error else error,
            http_status=self.http_status,
            retries=self.retries,
            throttled=self.throttled,
            retry_after=self.retry_after,
            concurrency=self.concurrency,
        )


class ModelCall:
    """Times one model call from the stream of token-bearing chunks it receives. TTFT counts
    from ``sent()`` (the request leaving, after any wait for a pooled connection) when the
    client reports it, else from the step's start."""

    __slots__ = ("_at", "_last", "_sent", "_step", "_task", "_try")

    def __init__(self, task: Task, step: Step) -> None:
        self._task = task
        self._step = step
        self._last: float | None = None
        self._sent = step.start
        self._try = step.start  # when the current attempt began
        self._at: float | None = None  # when the body's latest bytes arrived

    @property
    def step(self) -> Step:
        return self._step

    def attempt(self) -> None:
        """Another attempt begins (a retry, its backoff over): the step's ``wait`` counts the
        time each attempt spent before its request went out, not the backoffs between them."""
        self._try = self._task.now()

    def sent(self) -> None:
        """The request is being written (a retry calls this again)."""
        self._sent = self._task.now()
        self._step.wait = (self._step.wait or 0.0) + self._sent - self._try
        self._last = None
        self._at = None
        self._step.ttft = None

    def arrived(self, at: float | None = None) -> None:
        """Bytes of the body arrived: the tokens they carry are timed from that moment, however
        long the client takes to get to them. ``at`` is when the transport saw them arrive, on
        ``time.monotonic`` (used when the task measures on that clock), else it is now."""
        task = self._task
        now = task.now()
        if at is not None and task.clock is time.monotonic:
            # Never before the request left or the previous token: a gap is never negative.
            now = min(now, max(at - task.t0, self._sent if self._last is None else self._last))
        self._at = now

    def headers(self, status: int, at: float | None = None) -> None:
        """The response headers arrived (``at``: when on the socket, as ``arrived`` takes it)."""
        now = self._task.now()
        task = self._task
        if at is not None and task.clock is time.monotonic:
            now = min(now, max(at - task.t0, self._sent))
        self._step.headers = now - self._sent
        self._step.http_status = status

    def token(self, *, content: bool = True) -> None:
        """A chunk that carries at least one token arrived. ``content`` is False for tool-call or
        reasoning deltas: they count for TTFT and ITL but not for time to first output."""
        now = self._task.now() if self._at is None else self._at
        task = self._task
        if self._last is None:
            self._step.ttft = now - self._sent
        else:
            task._gaps.append(now - self._last)
        self._last = now
        if content and task.ttfo is None:
            task.ttfo = now - task.start

    def set_tokens(self, tokens_in: int | None, tokens_out: int | None) -> None:
        """Token counts known only after the call ended (an offline estimate)."""
        self._step.tokens_in = tokens_in
        self._step.tokens_out = tokens_out

    def finish(
        self, *, tokens_in: int | None, tokens_out: int | None, status: Status = "ok"
    ) -> None:
        """The call ended: when its last bytes arrived (``arrived``), else now."""
        now = self._task.now()
        end = now if self._at is None or status != "ok" else self._at
        if self._at is not None and status == "ok":
            self._step.read_delay = now - self._at
        self._step.duration = end - self._step.start
        if self._task._open is self._step:
            self._task._open = None
        self._step.tokens_in = tokens_in
        self._step.tokens_out = tokens_out
        self._step.status = status
