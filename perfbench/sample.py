"""The Sample: one execution of one case, the record every statistic is computed from.

Its ``to_json`` form is the line format of ``samples.jsonl`` and the export schema. Times are
seconds on the monotonic clock, relative to the start of the run directory's session."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "rate_limited", "cancelled", "dropped"]
# A model call, a tool call of the built-in loop, or a command agent's own work between its
# model calls (``agent``: its process's time outside every model call).
StepKind = Literal["model", "tool", "agent"]
Phase = Literal["warmup", "measured"]
STATUSES: tuple[Status, ...] = ("ok", "error", "timeout", "rate_limited", "cancelled", "dropped")

# Why a task failed: one vocabulary for every target, the in-process mock included, so one
# profile's faults read the same on ``-t mock`` and ``-t mock+http``. Kinds ending in ``_`` or
# ``:`` take a suffix (``http_503``, ``unhandled:KeyError``). The README and
# docs/agent-targets.md describe each.
ERROR_KINDS: dict[str, str] = {
    # the call
    "connect_error": "the connection could not be made (refused, DNS, connect timeout)",
    "timeout": "no answer in time (the case's timeout_s, or no bytes for the read timeout)",
    "rate_limited": "HTTP 429, after any retries",
    "http_": "any other refused answer, by its HTTP status (http_500, http_503…)",
    "connection_dropped": "the connection broke before or while the body was read",
    "malformed_stream": "a model's reply that is not what its API promises (bad JSON, cut short)",
    "stream_error": "an error event inside a model's stream",
    "malformed_response": "an agent's answer that is not JSON or lacks its output",
    "transport_error": "any other transport failure (a proxy's error…)",
    "too_large": "a reply past a read limit: body, event-stream line, decompression ratio",
    # the agent
    "max_steps": "no final answer after the case's max_steps",
    "unknown_tool": "the model called a tool the case does not declare",
    "agent_exception:": "a Python agent raised (by the exception's name)",
    "agent_not_async": "a Python agent returned something not awaitable",
    "agent_exit": "a command agent exited with a status other than 0, or was killed by a signal",
    "agent_not_started": "a command agent's program could not be started",
    "no_model_call": "a command agent finished without calling a model through the proxy",
    "proxy_no_upstream": "a command agent called a model API its --upstream does not serve",
    "proxy_refused": "a command agent sent the proxy a path that is not a model API route "
    "(outside --base-url: .., %2F…); refused with 400, never forwarded",
    "replay_miss": "a replaying mock's recording has no such call (case, call number)",
    # the runner
    "dropped": "open loop: not started, max_in_flight tasks were in flight",
    "cancelled": "stopped (Ctrl-C) while in flight; run again on --resume",
    "unhandled:": "a target raised instead of returning a sample (a bug in the target)",
}


def known_kind(kind: str) -> bool:
    """Whether ``kind`` is in the vocabulary (a suffixed kind by its prefix)."""
    if kind in ERROR_KINDS:
        return True
    return any(kind.startswith(k) and len(kind) > len(k) for k in ERROR_KINDS if k[-1] in "_:")


def status_of(kind: str) -> Status:
    """The status of a task that failed with ``kind``."""
    if kind == "rate_limited":
        return "rate_limited"
    return "timeout" if kind == "timeout" else "error"


# A step's keys written only when set: most steps have none of them.
_STEP_SOMETIMES = (
    "model_served",
    "tokens_cache_read",
    "tokens_cache_write",
    "tokens_reasoning",
    "stream",
)


@dataclass(slots=True)
class Step:
    """One model call or tool call inside a task."""

    kind: StepKind
    name: str
    start: float
    duration: float = 0.0
    ttft: float | None = None  # from the request being sent to the first token
    tokens_in: int | None = None
    tokens_out: int | None = None
    status: Status = "ok"
    wait: float | None = None  # from the step's start to the request being sent (pool, connect)
    headers: float | None = None  # from the request being sent to the response headers' arrival
    http_status: int | None = None
    # The client's own delay: from the last bytes' arrival on the socket to perfbench reading
    # them (its queueing when busy). Not in ``duration`` nor the task's latency, which end at
    # the arrival; here so that it is seen rather than hidden.
    read_delay: float | None = None
    turn: int | None = None  # a multi-turn case's turn (0, 1, …); None for every other case
    # The offline tokenizer's count of the reply when the API also reported usage
    # (``tokens_out``): the two compared per request. None unless usage was checked.
    tokens_estimate: int | None = None
    # The model a call asked for, where the target does not name it (an agent's calls through
    # the proxy choose their own), and why the reply ended (stop, length, tool_calls…, as the
    # API said it). None: not seen. OpenTelemetry's chat spans carry both (otel.py).
    model: str | None = None
    finish: str | None = None
    # The call's own share of the task's figures of the same names (a reply's usage, as the
    # API reported it; the model that answered when not the one asked). None: not reported.
    model_served: str | None = None
    tokens_cache_read: int | None = None
    tokens_cache_write: int | None = None
    tokens_reasoning: int | None = None
    # A call through the proxy: whether its request asked to stream (`"stream": true`), the
    # agent's choice, not --stream's. None: not seen (perfbench made the call itself).
    stream: bool | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {
            "kind": self.kind,
            "name": self.name,
            "start": self.start,
            "duration": self.duration,
            "wait": self.wait,
            "headers": self.headers,
            "ttft": self.ttft,
            "http_status": self.http_status,
            "read_delay": self.read_delay,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "status": self.status,
        }
        if self.turn is not None:  # only multi-turn cases pay for the key
            doc["turn"] = self.turn
        if self.tokens_estimate is not None:
            doc["tokens_estimate"] = self.tokens_estimate
        if self.model is not None:
            doc["model"] = self.model
        if self.finish is not None:
            doc["finish"] = self.finish
        for key in _STEP_SOMETIMES:
            if (value := getattr(self, key)) is not None:
                doc[key] = value
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Step:
        return cls(**d)


@dataclass(slots=True)
class Sample:
    """What one task execution measured; failures are samples too (``status`` says which)."""

    phase: Phase
    run: int
    case: str
    iteration: int
    language: str
    start: float
    end: float
    status: Status = "ok"
    tags: list[str] = field(default_factory=list)
    scheduled: float | None = None  # intended start (open-loop load); None in closed loop
    ttft: float | None = None
    ttfo: float | None = None
    itl_mean: float | None = None
    itl_max: float | None = None
    # Every gap between the task's token-bearing chunks, as [microseconds, count] pairs, the
    # microseconds rounded to 3 significant figures (within 0.5%): the pooled ITL distribution
    # is recomputed from samples.jsonl without a line per token. Sorted by the gap.
    itl_gaps: list[list[int]] | None = None
    steps: list[Step] = field(default_factory=list)
    model_calls: int = 0
    tool_calls: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_estimated: bool = False
    tokenizer: str | None = None  # the encoding that estimated the tokens, when estimated
    # The offline tokenizer's count of the output when the API also reported usage, so the
    # two can be compared (a proxy tokenizer for another model family drifts).
    tokens_out_estimate: int | None = None
    tokens_cache_read: int | None = None  # of tokens_in: read from the prompt cache
    tokens_cache_write: int | None = None  # of tokens_in: written to it (Anthropic)
    tokens_reasoning: int | None = None  # of tokens_out: reasoning tokens, where reported
    model_served: str | None = None  # the model that answered, when not the one asked
    cost: float | None = None  # USD for this task's tokens; None when unpriced
    cost_reported: float | None = None  # USD a gateway reported (x-litellm-response-cost)
    input_chars: int = 0  # characters of the case's input (system prompt included)
    expect_ok: bool | None = None
    error_kind: str | None = None
    error: str | None = None
    http_status: int | None = None
    retries: int = 0
    throttled: int = 0  # 429 answers received (each retried or, at the end, the failure)
    retry_after: float | None = None  # what the last refusal asked to wait, in seconds
    concurrency: int = 0  # tasks in flight at its start in its process (with --workers: its worker)
    exit_status: int | None = None  # a command agent's: its exit code, or -N for signal N
    # A command agent's processes still running when it exited (a setsid child, a daemon),
    # killed at the end of its task; None: none.
    leftovers: int | None = None

    @property
    def latency(self) -> float:
        return self.end - self.start

    @property
    def latency_intended(self) -> float | None:
        """Latency from the intended start (coordinated-omission corrected), open loop only."""
        return None if self.scheduled is None else self.end - self.scheduled

    @property
    def key(self) -> tuple[str, int, str, int]:
        """Identity of the task: the same key never runs twice in one run directory."""
        return (self.phase, self.run, self.case, self.iteration)

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "run": self.run,
            "case": self.case,
            "iteration": self.iteration,
            "language": self.language,
            "tags": self.tags,
            "status": self.status,
            "scheduled": self.scheduled,
            "start": self.start,
            "end": self.end,
            "latency": self.latency,
            "latency_intended": self.latency_intended,
            "ttft": self.ttft,
            "ttfo": self.ttfo,
            "itl_mean": self.itl_mean,
            "itl_max": self.itl_max,
            "itl_gaps": self.itl_gaps,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_estimated": self.tokens_estimated,
            "tokenizer": self.tokenizer,
            "tokens_out_estimate": self.tokens_out_estimate,
            "tokens_cache_read": self.tokens_cache_read,
            "tokens_cache_write": self.tokens_cache_write,
            "tokens_reasoning": self.tokens_reasoning,
            "model_served": self.model_served,
            "cost": self.cost,
            "cost_reported": self.cost_reported,
            "input_chars": self.input_chars,
            "expect_ok": self.expect_ok,
            "error_kind": self.error_kind,
            "error": self.error,
            "http_status": self.http_status,
            "retries": self.retries,
            "throttled": self.throttled,
            "retry_after": self.retry_after,
            "concurrency": self.concurrency,
            "steps": [s.to_json() for s in self.steps],
            **({"exit_status": self.exit_status} if self.exit_status is not None else {}),
            **({"leftovers": self.leftovers} if self.leftovers is not None else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Sample:
        fields = {k: v for k, v in d.items() if k not in _DERIVED}
        fields["steps"] = [Step.from_json(s) for s in d.get("steps", [])]
        return cls(**fields)


_DERIVED = frozenset({"latency", "latency_intended", "steps"})


def gap_counts(gaps: Iterable[float]) -> list[list[int]]:
    """Gaps in seconds as sorted [microseconds, count] pairs, each rounded to 3 significant
    figures (the HDR histograms' precision), so a stream of 1,000 near-equal gaps is a few
    pairs. Integer steps, not ``round(x, -k)`` with a computed k: this runs once per gap."""
    counts: dict[int, int] = {}
    for gap in gaps:
        us = int(gap * 1e6 + 0.5)
        if us >= 1000:
            if us < 10_000:
                us = (us + 5) // 10 * 10
            elif us < 100_000:
                us = (us + 50) // 100 * 100
            elif us < 1_000_000:
                us = (us + 500) // 1000 * 1000
            else:
                step = 10 ** (len(str(us)) - 3)
                us = (us + step // 2) // step * step
        counts[us] = counts.get(us, 0) + 1
    return [[us, n] for us, n in sorted(counts.items())]
