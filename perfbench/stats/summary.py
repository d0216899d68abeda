"""Statistics over samples: per run, per case, per language and overall, then across runs,
and pooled over all runs.

Pure: samples in, plain dicts out (the ``summary.json`` schema). The unit of replication is the
run: each run is summarised on its own, and across runs the *median* of the per-run values is
reported with their min and max (never the mean across runs: one slow run would move it).

Latency percentiles are over successful tasks (``latency``) and over all finished tasks with
each failure counted at no less than its case's timeout (``latency_all``), so a target that
refuses load cannot look faster. Throughput is successful tasks per second of the run's window
(first task start to last task end).
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson

from perfbench.sample import STATUSES, Sample, Step
from perfbench.stats import early_stopping
from perfbench.stats.breakdown import Breakdown
from perfbench.stats.distributions import Distributions
from perfbench.stats.goodput import Slo, percentile_checks, request_figures
from perfbench.stats.timeline import Timeline

SCHEMA = 1
Metrics = dict[str, Any]
# A request faster than this (an in-process mock on a virtual clock) has no meaningful rate.
MIN_E2E = 1e-6
LATE_S = 0.002  # an open-loop task that started this much after its schedule counts as late


class Summary(TypedDict, total=False):
    """summary.json (docs/metrics.md): what every report reads, typed."""

    schema: int
    warmup_tasks: int
    runs: list[Metrics]  # one per measured run: window, overall, cases, languages, tags
    across_runs: dict[str, Any]  # per scope and metric: median, min, max, n over the runs
    pooled: Metrics  # every run's tasks together: distributions
    histograms: dict[str, str]  # encoded HDR histograms per run and case
    timeline: dict[str, Any]  # tasks and latency by time since the session's start (timeline.py)
    client: dict[str, Any]  # how busy perfbench was (loop lag, CPU, headroom)
    adaptive: dict[str, Any]  # the AIMD limit's history and where it settled
    server_metrics: dict[str, Any]  # run --server-metrics: the server's own gauges over time
    scenario: dict[str, Any]  # run --scenario: VALID or INVALID by its rules (stats/scenario.py)


_STATUS = {status: i for i, status in enumerate(STATUSES)}
# The distributions a scope keeps (``_Group.dists``), by index.
_DISTS = (
    "latency",  # successful tasks
    "latency_all",  # every finished task, a failure at no less than its timeout
    "ttft",
    # Per streamed task, the mean gap between its token-bearing chunks (a sample keeps only
    # that mean and the maximum, not every gap): the distribution of ITL over tasks.
    "itl",
    # Every gap of every streamed task, pooled (vLLM bench's ITL): from each sample's
    # bucketed gaps (3 significant figures).
    "itl_pooled",
    "ttfo",  # per task: to its first content token
    "latency_intended",  # open loop: from schedule
    "lag",  # open loop: start − scheduled start
    # Per model call: from its start to its request going out (a free pooled connection, a
    # new connection's handshake). Near zero unless the client's pool or connecting held it.
    "wait",
    # Per model call: from its last bytes' arrival to perfbench reading them (the client's own
    # queueing; outside the latencies, which end at the arrival).
    "read_delay",
    "tpot",  # per request: time per output token
    "request_ttft",  # every request's, not the task's
    # Per request: output tokens over its e2e, in thousands (a histogram holds 0..3600, and a
    # zero-latency server streams well over 3,600 tokens a second).
    "request_ktps",
    # Per request with both: the API's output tokens over the offline tokenizer's count.
    "request_usage_ratio",
    # Multi-turn cases: each turn from its first step's start to its last step's end, and the
    # TTFT of its first model call (what a user waits for after each message).
    "turn_latency",
    "turn_ttft",
)
(LATENCY, LATENCY_ALL, TTFT, ITL, ITL_POOLED, TTFO, LATENCY_INTENDED, LAG, WAIT, READ_DELAY,
 TPOT, REQUEST_TTFT, REQUEST_KTPS, REQUEST_USAGE_RATIO, TURN_LATENCY, TURN_TTFT) = range(
    len(_DISTS))  # fmt: skip


@dataclass(slots=True)
class _Group:
    """Everything one scope (a run overall, a case, a language) accumulates. Slots: a run of
    10^5 cases has as many groups (a ``__dict__`` each was 1.6 KB of a cell's 6.7)."""

    # Tasks by status, in STATUSES' order (a list: a dict of six was 272 B of every case).
    counts: list[int] = field(default_factory=lambda: [0] * len(STATUSES))
    # Every distribution, by its index (_DISTS): a one-task case's are one array.
    dists: Distributions = field(default_factory=lambda: Distributions(len(_DISTS)))
    late: int = 0
    throttled: int = 0
    retries: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    with_tokens: int = 0
    cost: float = 0.0
    priced: int = 0
    input_chars: int = 0
    first_tokens_in: int = 0
    first_chars: int = 0
    usage_out: int = 0  # output tokens by the API, for samples that also have an estimate
    estimated_out: int = 0
    cache_read: int = 0  # input tokens the prompt cache served
    reasoning: int = 0
    cost_reported: float = 0.0  # what a gateway reported, for the tasks it reported on
    reported: int = 0
    # Made at their first entry: two empty dicts were 160 B of every case.
    served: dict[str, int] | None = None  # model that answered → tasks
    failures: dict[str, list[Any]] | None = None  # kind → [count, example]
    tokens_estimated: bool = False
    model_calls: int = 0
    tool_calls: int = 0
    expect_mismatch: int = 0
    first_start: float = float("inf")
    last_end: float = float("-inf")
    # Requests (model calls): a task of 3 model calls is 3 requests (stats/goodput.py).
    requests: int = 0
    requests_failed: int = 0
    # A proxied agent's answered calls by whether they asked to stream (Step.stream), and of
    # those that asked, the ones answered with one body: who to tell when TTFT is missing.
    asked_stream: int = 0
    asked_stream_whole: int = 0
    asked_whole: int = 0
    slo: Slo | None = None  # run --slo: goodput is counted against it
    slo_tasks: int = 0
    slo_requests: int = 0
    breakdown: Breakdown = field(default_factory=Breakdown)  # time split, success (breakdown.py)

    def add(self, s: Sample, timeout: float) -> None:
        self.counts[_STATUS[s.status]] += 1
        if s.scheduled is not None:
            lag = s.start - s.scheduled
            self.dists.add(LAG, lag)
            self.late += lag > LATE_S
        if s.status != "ok" and s.error_kind:
            failures = self.failures
            if failures is None:
                failures = self.failures = {}
            entry = failures.get(s.error_kind)
            if entry is None:
                failures[s.error_kind] = [1, (s.error or "")[:200]]
            else:
                entry[0] += 1
        # A task stopped in its backoff (Ctrl-C) was answered 429 all the same: counted.
        self.throttled += s.throttled
        self.retries += s.retries
        if s.status in ("cancelled", "dropped"):
            # Stopped by the operator, or never started (open loop over max_in_flight):
            # counted, but neither a success nor a failure of the target.
            return
        self.breakdown.add(s)
        if s.start < self.first_start:
            self.first_start = s.start
        if s.end > self.last_end:
            self.last_end = s.end
        latency = s.end - s.start
        if s.status == "ok":
            self.dists.add(LATENCY, latency)
            self.dists.add(LATENCY_ALL, latency)
            if s.scheduled is not None:
                self.dists.add(LATENCY_INTENDED, s.end - s.scheduled)
        else:
            self.dists.add(LATENCY_ALL, latency if latency > timeout else timeout)
        if s.ttft is not None:
            self.dists.add(TTFT, s.ttft)
        if s.itl_mean is not None:
            self.dists.add(ITL, s.itl_mean)
        if s.itl_gaps:
            dists = self.dists
            for us, n in s.itl_gaps:
                dists.add_count(ITL_POOLED, us / 1e6, n)
        if s.ttfo is not None:
            self.dists.add(TTFO, s.ttfo)
        if s.tokens_out is not None or s.tokens_in is not None:
            self.with_tokens += 1
            self.tokens_in += s.tokens_in or 0
            self.tokens_out += s.tokens_out or 0
            self.tokens_estimated |= s.tokens_estimated
        self.model_calls += s.model_calls
        self.tool_calls += s.tool_calls
        self.expect_mismatch += s.expect_ok is False
        self.input_chars += s.input_chars
        for st in s.steps:
            if st.wait is not None:  # model calls only: a tool call has no request
                self.dists.add(WAIT, st.wait)
            if st.read_delay is not None:
                self.dists.add(READ_DELAY, st.read_delay)
            if st.kind == "model":
                self._request(st)
        if self.slo is not None:
            self.slo_tasks += self.slo.task_meets(s)
        if s.status == "ok" and s.steps and s.steps[0].turn is not None:
            self._turns(s.steps)
        # The tokenizer effect shows in the first call's input, before any tool results.
        first = next((st.tokens_in for st in s.steps if st.kind == "model"), None)
        if first is not None:
            self.first_tokens_in += first
            self.first_chars += s.input_chars
        if s.cost is not None:
            self.cost += s.cost
            self.priced += 1
        if s.tokens_out_estimate is not None and s.tokens_out is not None:
            self.usage_out += s.tokens_out
            self.estimated_out += s.tokens_out_estimate
        if s.tokens_cache_read is not None or s.tokens_reasoning is not None or s.model_served:
            self._details(s)
        if s.cost_reported is not None:
            self.cost_reported += s.cost_reported
            self.reported += 1

    def _turns(self, steps: list[Step]) -> None:
        spans: dict[int, list[float]] = {}
        first_ttft: dict[int, float | None] = {}
        for st in steps:
            turn = st.turn if st.turn is not None else -1
            span = spans.setdefault(turn, [st.start, st.start + st.duration])
            span[0], span[1] = min(span[0], st.start), max(span[1], st.start + st.duration)
            if st.kind == "model" and turn not in first_ttft:
                first_ttft[turn] = st.ttft
        for turn, (begin, end) in spans.items():
            self.dists.add(TURN_LATENCY, end - begin)
            ttft = first_ttft.get(turn)
            if ttft is not None:
                self.dists.add(TURN_TTFT, ttft)

    def _request(self, st: Step) -> None:
        self.requests += 1
        self.requests_failed += st.status != "ok"
        if st.status == "ok":
            if st.ttft is not None:
                self.dists.add(REQUEST_TTFT, st.ttft)
            if st.stream is not None:
                self._asked(st.stream, st.ttft is not None)
            figures = request_figures(st)
            if figures["tpot"] is not None:
                self.dists.add(TPOT, figures["tpot"])
            e2e = figures["e2e"]
            if st.tokens_out and e2e is not None and e2e >= MIN_E2E:
                self.dists.add(REQUEST_KTPS, st.tokens_out / e2e / 1000)
            if st.tokens_out is not None and st.tokens_estimate:
                self.dists.add(REQUEST_USAGE_RATIO, st.tokens_out / st.tokens_estimate)
        if self.slo is not None:
            self.slo_requests += self.slo.request_meets(st)

    def _streams(self) -> dict[str, Any]:
        """A proxied agent's calls by what they asked: only where there were such calls."""
        if not (self.asked_stream or self.asked_whole):
            return {}
        return {"agent_streams": {"asked": self.asked_stream,
                                  "asked_but_whole": self.asked_stream_whole,
                                  "not_asked": self.asked_whole}}  # fmt: skip

    def _asked(self, stream: bool, timed: bool) -> None:
        if stream:
            self.asked_stream += 1
            self.asked_stream_whole += not timed
        else:
            self.asked_whole += 1

    def _details(self, s: Sample) -> None:
        """What few samples carry (cache and reasoning tokens, a served model): off the
        common path."""
        self.cache_read += s.tokens_cache_read or 0
        self.reasoning += s.tokens_reasoning or 0
        if s.model_served:
            served = self.served
            if served is None:
                served = self.served = {}
            served[s.model_served] = served.get(s.model_served, 0) + 1

    def merge(self, other: _Group) -> None:
        counts = self.counts
        for i, n in enumerate(other.counts):
            counts[i] += n
        self.dists.merge(other.dists)
        self.late += other.late
        self.throttled += other.throttled
        self.retries += other.retries
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.with_tokens += other.with_tokens
        self.tokens_estimated |= other.tokens_estimated
        self.model_calls += other.model_calls
        self.tool_calls += other.tool_calls
        self.asked_stream += other.asked_stream
        self.asked_stream_whole += other.asked_stream_whole
        self.asked_whole += other.asked_whole
        self.expect_mismatch += other.expect_mismatch
        self.cost += other.cost
        self.priced += other.priced
        self.input_chars += other.input_chars
        self.first_tokens_in += other.first_tokens_in
        self.first_chars += other.first_chars
        self.usage_out += other.usage_out
        self.estimated_out += other.estimated_out
        self.cache_read += other.cache_read
        self.reasoning += other.reasoning
        self.cost_reported += other.cost_reported
        self.reported += other.reported
        if other.served:
            served = self.served = self.served or {}
            for name, n in other.served.items():
                served[name] = served.get(name, 0) + n
        if other.failures:
            failures = self.failures = self.failures or {}
            for kind, (count, example) in other.failures.items():
                entry = failures.setdefault(kind, [0, example])
                entry[0] += count
        self.first_start = min(self.first_start, other.first_start)
        self.last_end = max(self.last_end, other.last_end)
        self.requests += other.requests
        self.requests_failed += other.requests_failed
        self.slo = self.slo or other.slo
        self.slo_tasks += other.slo_tasks
        self.slo_requests += other.slo_requests
        self.breakdown.merge(other.breakdown)

    def finish(self, window: float) -> Metrics:
        counts: dict[str, int] = dict(zip(STATUSES, self.counts, strict=True))
        tasks = sum(n for k, n in counts.items() if k not in ("cancelled", "dropped"))
        ok = counts["ok"]
        return {
            "tasks": tasks,
            **counts,
            "error_rate": (tasks - ok) / tasks if tasks else None,
            "expect_mismatch": self.expect_mismatch,
            "failures": {
                kind: {"count": count, "example": example}
                for kind, (count, example) in sorted((self.failures or {}).items())
            },
            "latency": self.dists.summary(LATENCY),
            "latency_all": self.dists.summary(LATENCY_ALL),
            "ttft": self.dists.summary(TTFT),
            "itl": self.dists.summary(ITL),
            "itl_pooled": self.dists.summary(ITL_POOLED),
            "ttfo": self.dists.summary(TTFO),
            "latency_intended": self.dists.summary(LATENCY_INTENDED),
            "schedule_lag": self.dists.summary(LAG),
            "wait": self.dists.summary(WAIT),
            "read_delay": self.dists.summary(READ_DELAY),
            "late": self.late,
            "throttled": self.throttled,
            "throttle_rate": self.throttled / tasks if tasks else None,
            "retries": self.retries,
            "tokens_in": _per(self.tokens_in, self.with_tokens),
            "tokens_out": _per(self.tokens_out, self.with_tokens),
            "tokens_estimated": self.tokens_estimated,
            "input_chars": _per(self.input_chars, tasks),
            "tokens_per_100_chars": _per(100 * self.first_tokens_in, self.first_chars),
            "cost_per_task": self.cost / self.priced if self.priced else None,
            # A gateway's own figure, beside perfbench's (over the tasks it reported on).
            "cost_reported_per_task": self.cost_reported / self.reported if self.reported else None,
            "tokens_cache_read": _per(self.cache_read, self.with_tokens),
            "tokens_reasoning": _per(self.reasoning, self.with_tokens),
            "models_served": dict(sorted((self.served or {}).items())),
            "cost_per_1k_chars": 1000 * self.cost / self.input_chars
            if self.priced == tasks and self.input_chars
            else None,
            "unpriced": tasks - self.priced,
            # API usage over the offline tokenizer's count of the same output (1.0 = agree).
            "usage_vs_estimate": self.usage_out / self.estimated_out
            if self.estimated_out
            else None,
            "model_calls": _per(self.model_calls, tasks),
            "tool_calls": _per(self.tool_calls, tasks),
            "throughput": ok / window if window > 0 else None,
            "output_tokens_per_s": self.tokens_out / window if window > 0 else None,
            "requests": self.requests,
            "request_error_rate": _per(self.requests_failed, self.requests),
            "request_rate": self.requests / window if window > 0 else None,
            "tpot": self.dists.summary(TPOT),
            "request_ttft": self.dists.summary(REQUEST_TTFT),
            "request_tokens_per_s": _scaled(self.dists.summary(REQUEST_KTPS), 1000),
            "request_usage_vs_estimate": self.dists.summary(REQUEST_USAGE_RATIO),
            "turn_latency": self.dists.summary(TURN_LATENCY),
            "turn_ttft": self.dists.summary(TURN_TTFT),
            "early_stopping": self.early_stopping(),
            **({"goodput": self._goodput(tasks, window)} if self.slo is not None else {}),
            **self.breakdown.finish(),
            **self._streams(),
        }

    def _goodput(self, tasks: int, window: float) -> dict[str, Any]:
        """What met every objective of --slo: shares, and rates over the run's window."""
        assert self.slo is not None
        return {
            "slo": self.slo.text,
            "tasks": self.slo_tasks,
            "task_share": _per(self.slo_tasks, tasks),
            "task_rate": self.slo_tasks / window if window > 0 else None,
            "requests": self.slo_requests,
            "request_share": _per(self.slo_requests, self.requests),
            "request_rate": self.slo_requests / window if window > 0 else None,
            **({"objectives": self._percentile_checks()} if self.slo.percentile else {}),
        }

    def early_stopping(self) -> Metrics:
        """MLPerf's early-stopping P90/P95/P99 of the tail figures a verdict rests on."""
        figures = {"latency": LATENCY, "ttft": TTFT, "request_ttft": REQUEST_TTFT, "tpot": TPOT}
        dists = self.dists
        return {
            name: early_stopping.tails(dists.histogram(i))
            for name, i in figures.items()
            if dists.count(i)
        }

    def _percentile_checks(self) -> list[dict[str, Any]]:
        assert self.slo is not None
        figures = {"ttft": REQUEST_TTFT, "tpot": TPOT, "latency": LATENCY}
        read = self.dists.histogram
        return percentile_checks(self.slo, {name: read(i) for name, i in figures.items()})

    def histograms(self) -> dict[str, str]:
        named = {"latency": LATENCY, "ttft": TTFT, "itl": ITL, "itl_pooled": ITL_POOLED}
        dists = self.dists
        return {name: dists.histogram(i).encode() for name, i in named.items() if dists.count(i)}


def _scaled(summary: dict[str, Any] | None, factor: float) -> dict[str, Any] | None:
    """A distribution's figures times ``factor`` (its count and method as they are)."""
    if summary is None:
        return None
    keep = ("n", "method", "clipped")
    return {k: v if k in keep or v is None else v * factor for k, v in summary.items()}


def _per(total: int, n: int) -> float | None:
    return total / n if n else None


Cell = tuple[str, str, tuple[str, ...]]  # a sample's case, language and tags


class RunScopes:
    """One run's scopes. A sample goes into one group only, its cell (case, language, tags:
    one per case, unless samples of one case id disagree); each case, language, tag and the
    run overall is a merge of cells, made when asked for (``finish``). Adding every sample to
    four groups cost ~8 µs of the per-task budget (issue 26); merging is lossless while the
    histograms are exact and HDR-precise after, as adding is."""

    def __init__(self, slo: Slo | None = None) -> None:
        self.slo = slo
        self.cells: dict[Cell, _Group] = {}
        # A worker process's timeline rides along with a run it hands over (Summarizer.take_run)
        # and is merged into the parent's by ``absorb``; None everywhere else.
        self.timeline: Timeline | None = None

    def add(self, s: Sample, timeout: float) -> None:
        key = (s.case, s.language, tuple(s.tags))
        group = self.cells.get(key)
        if group is None:
            group = self.cells[key] = _Group(slo=self.slo)
        group.add(s, timeout)

    def merge(self, other: RunScopes, *, take: bool = False) -> None:
        """Add ``other``'s cells; with ``take``, a cell this lacks is taken as it is, not
        copied (``other`` is not used again: a closed run pooled)."""
        for key, group in other.cells.items():
            mine = self.cells.get(key)
            if mine is None:
                self.cells[key] = group if take else _copy(group, self.slo)
            else:
                mine.merge(group)

    @property
    def window(self) -> float:
        cells = self.cells.values()
        if not cells:
            return 0.0
        return max(0.0, max(g.last_end for g in cells) - min(g.first_start for g in cells))

    @property
    def overall(self) -> _Group:
        return self._merged(lambda cell: ("",))[""] if self.cells else _Group(slo=self.slo)

    @property
    def cases(self) -> dict[str, _Group]:
        return self._merged(lambda cell: (cell[0],))

    @property
    def languages(self) -> dict[str, _Group]:
        return self._merged(lambda cell: (cell[1],))

    @property
    def tags(self) -> dict[str, _Group]:
        return self._merged(lambda cell: cell[2])

    def _merged(self, keys: Callable[[Cell], Iterable[str]]) -> dict[str, _Group]:
        """The cells merged by ``keys`` (a cell may count in several: its tags). A scope of
        one cell is that cell itself, not a copy: don't change what this returns."""
        members: dict[str, list[_Group]] = {}
        for cell, group in self.cells.items():
            for key in keys(cell):
                members.setdefault(key, []).append(group)
        merged: dict[str, _Group] = {}
        for key, groups in members.items():
            if len(groups) == 1:
                merged[key] = groups[0]
                continue
            into = merged[key] = _Group(slo=self.slo)
            for group in groups:
                into.merge(group)
        return merged

    def finish(self, window: float) -> Metrics:
        # Every scope shares the run's window, so per-case throughputs add up to the total.
        return {
            "window": window,
            "overall": self.overall.finish(window),
            "cases": CaseFigures((k, g.finish(window)) for k, g in sorted(self.cases.items())),
            "languages": {k: g.finish(window) for k, g in sorted(self.languages.items())},
            "tags": {k: g.finish(window) for k, g in sorted(self.tags.items())},
        }

    def histograms(self, prefix: str) -> dict[str, str]:
        # Only per-case histograms are stored: a language's and the overall distribution are
        # merges of its cases' (every case has one language), and encoding costs ~1 µs a value.
        return {
            f"{prefix}/case/{case}/{name}": blob
            for case, group in sorted(self.cases.items())
            for name, blob in group.histograms().items()
        }


class CaseFigures(Mapping[str, Metrics]):
    """Each case's figures in one scope (a run, or the runs pooled), made once as the run
    closes and kept packed (orjson, then zlib at its fastest level): as dicts they were ~12
    KB a case, 1.2 GB at the end of a 10^5-case run, packed ~1 KB (issue 38). A read unpacks
    a new dict (~70 µs), so a change to it is not kept; ``dict(...)`` gives them all."""

    __slots__ = ("_packed",)

    def __init__(self, figures: Iterable[tuple[str, Metrics]]) -> None:
        self._packed = {case: _pack(metrics) for case, metrics in figures}

    def __getitem__(self, case: str) -> Metrics:
        return _unpack(self._packed[case])

    def __contains__(self, case: object) -> bool:
        return case in self._packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def __repr__(self) -> str:
        return f"CaseFigures({dict(self)!r})"


def _pack(metrics: Metrics) -> bytes:
    return zlib.compress(orjson.dumps(metrics, option=orjson.OPT_SERIALIZE_NUMPY), 1)


def _unpack(packed: bytes) -> Metrics:
    metrics: Metrics = orjson.loads(zlib.decompress(packed))
    return metrics


class CaseSpreads(Mapping[str, dict[str, Any]]):
    """Each case's spread across runs (``_spread``), made when read from the runs' figures:
    summary.json's writer reads each once, and nothing else in a run does (10^5 cases'
    spreads held as dicts were ~3 KB a case)."""

    __slots__ = ("_keys", "_per_run")

    def __init__(self, per_run: list[Mapping[str, Metrics]]) -> None:
        self._per_run = per_run
        self._keys = sorted({k for scopes in per_run for k in scopes})

    def __getitem__(self, case: str) -> dict[str, Any]:
        values = [scopes[case] for scopes in self._per_run if case in scopes]
        if not values:
            raise KeyError(case)
        return _spread(values)

    def __contains__(self, case: object) -> bool:
        return any(case in scopes for scopes in self._per_run)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"CaseSpreads({dict(self)!r})"


def _copy(group: _Group, slo: Slo | None) -> _Group:
    """A group of its own with ``group``'s contents (merged into later without touching it)."""
    copy = _Group(slo=slo)
    copy.merge(group)
    return copy


class Summarizer:
    """Feed it samples in any order (``add``); close each run when it ends to free its memory
    (``close_run``); ``finish`` returns the ``summary.json`` document."""

    def __init__(self, timeouts: Mapping[str, float], slo: Slo | None = None) -> None:
        self._timeouts = timeouts
        self._slo = slo  # run --slo: goodput in every scope
        self._pooled = RunScopes(slo)  # every measured sample of every run, for distributions
        self._pooled_runs = 0
        self._windows = 0.0
        self._open: dict[int, RunScopes] = {}
        self._done: dict[int, Metrics] = {}
        self._blobs: dict[str, str] = {}
        self._timeline = Timeline()  # every finished task, warmup included
        self.warmup_tasks = 0

    def add(self, s: Sample) -> None:
        self._timeline.add(s)
        if s.phase == "warmup":
            self.warmup_tasks += 1
            return
        scopes = self._open.get(s.run)
        if scopes is None:
            scopes = self._open[s.run] = RunScopes(self._slo)
        scopes.add(s, self._timeouts.get(s.case, 0.0))

    def close_run(self, run: int) -> None:
        scopes = self._open.pop(run, None)
        if scopes is not None:
            window = scopes.window
            self._windows += window
            self._done[run] = {"run": run, **scopes.finish(window)}
            self._blobs.update(scopes.histograms(f"run/{run}"))
            # Pooling by merging closed runs keeps the per-sample path to one set of scopes;
            # the run's cells are taken, not copied (10^5 cases: a second group each).
            self._pooled.merge(scopes, take=True)
            self._pooled_runs += 1

    def take_run(self, run: int) -> RunScopes | None:
        """Hand over what a run has accumulated so far (a worker process sends it to the
        parent, which ``absorb``s it): lossless, histograms included. The timeline so far
        (warmup passes included) goes with it; a worker that ran no task of any measured run
        has no run to send it with, and its timeline is left out."""
        scopes = self._open.pop(run, None)
        if scopes is not None and self._timeline:
            scopes.timeline, self._timeline = self._timeline, Timeline()
        return scopes

    def absorb(self, run: int, scopes: RunScopes) -> None:
        """Merge another process's share of ``run`` into this one, before ``close_run``."""
        if scopes.timeline is not None:
            self._timeline.merge(scopes.timeline)
            scopes.timeline = None
        mine = self._open.get(run)
        if mine is None:
            self._open[run] = scopes
        else:
            mine.merge(scopes)

    def finish(self) -> Summary:
        for run in list(self._open):
            self.close_run(run)
        runs = [self._done[r] for r in sorted(self._done)]
        summary: Summary = {
            "schema": SCHEMA,
            "warmup_tasks": self.warmup_tasks,
            "runs": runs,
            "across_runs": _across(runs, CaseSpreads([r["cases"] for r in runs])),
            # Distributions over all runs together (throughput over the sum of run windows):
            # what a table of per-case spread shows; the release gate uses the per-run values.
            "pooled": self._pooled_doc(runs),
            "histograms": self._blobs,
        }
        if self._timeline:
            summary["timeline"] = self._timeline.to_json()
        return summary

    def _pooled_doc(self, runs: list[Metrics]) -> Metrics:
        """The pooled scopes' figures. Pooling one run gives that run's figures (its cells,
        its window): they are its document's, shared, not made again (10^5 cases: a third
        of the summary's memory)."""
        if self._pooled_runs == 1 and len(runs) == 1:
            return {k: v for k, v in runs[0].items() if k != "run"}
        return self._pooled.finish(self._windows)


def summarize(
    samples: Iterable[Sample], timeouts: Mapping[str, float], slo: Slo | None = None
) -> Summary:
    """The summary of a finished set of samples (what a run directory's samples.jsonl holds)."""
    summarizer = Summarizer(timeouts, slo)
    for s in samples:
        summarizer.add(s)
    return summarizer.finish()


def across_runs(runs: list[Metrics]) -> dict[str, Any]:
    """Median, min and max over runs of every numeric metric, per scope. A metric missing from
    some runs (a case that never succeeded in one) is summarised over the runs that have it."""
    return _across(runs, _spread_by_key([r.get("cases", {}) for r in runs]))


def _across(runs: list[Metrics], cases: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "runs": len(runs),
        "overall": _spread([r["overall"] for r in runs]),
        "cases": cases,
        # .get: summaries written before a scope existed (tags came later) still load.
        "languages": _spread_by_key([r.get("languages", {}) for r in runs]),
        "tags": _spread_by_key([r.get("tags", {}) for r in runs]),
    }


def _spread_by_key(per_run: list[dict[str, Metrics]]) -> dict[str, Any]:
    keys = sorted({k for scopes in per_run for k in scopes})
    same: dict[tuple[Any, ...], Any] = {}
    return {k: _spread([scopes[k] for scopes in per_run if k in scopes], same) for k in keys}


def _spread(
    values: list[Metrics], same: dict[tuple[Any, ...], Any] | None = None
) -> dict[str, Any]:
    """Median, min, max and n of each numeric metric over ``values``. Equal spreads are one
    dict (``same`` holds them, across the scopes of a call): a case of one task has the same
    figure as its P50, P99, min, max and mean, and most of its counts are every case's (10^5
    cases: ~137 spreads a case, ~20 distinct)."""
    same = {} if same is None else same
    flat: dict[str, list[float]] = {}
    for metrics in values:
        for key, v in _numbers(metrics):
            flat.setdefault(key, []).append(v)
    out = {}
    for key, vs in flat.items():
        if len(vs) == 1:  # one run: its value is the median, min and max
            v = vs[0]
            spread: tuple[float, float, float, int] = (v, v, v, 1)
        else:
            spread = (statistics.median(vs), min(vs), max(vs), len(vs))
        # 0.0 == -0.0, but JSON writes them apart: a zero's sign is part of the key.
        signs = tuple(math.copysign(1.0, v) for v in spread[:3]) if 0 in spread[:3] else ()
        mark = (spread, signs)
        entry = same.get(mark)
        if entry is None:
            entry = same[mark] = dict(zip(_SPREAD, spread, strict=True))
        out[key] = entry
    return out


_SPREAD = ("median", "min", "max", "n")


def _numbers(metrics: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, float]]:
    for key, v in metrics.items():
        if v is None or isinstance(v, bool) or key in ("method", "run"):
            continue
        if isinstance(v, int | float):
            # One string per dotted name: every case has the same ~137, made anew per case
            # otherwise (3,000 cases: 61 -> 51 MB of per-case spreads), and joined anew.
            yield _dotted(prefix, key), float(v)
        elif isinstance(v, Mapping):
            yield from _numbers(v, _dotted(prefix, key) + ".")


@functools.cache
def _dotted(prefix: str, key: str) -> str:
    return sys.intern(prefix + key)


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures ``perfbench list`` shows, kept in meta.json so listing reads nothing else."""
    overall = summary["across_runs"]["overall"]

    def med(key: str) -> float | None:
        entry = overall.get(key)
        return entry["median"] if entry else None

    tasks = sum(r["overall"]["tasks"] for r in summary["runs"])
    ok = sum(r["overall"]["ok"] for r in summary["runs"])
    return {
        "tasks": tasks,
        "ok": ok,
        "p50": med("latency.p50"),
        "p95": med("latency.p95"),
        "throughput": med("throughput"),
    }
