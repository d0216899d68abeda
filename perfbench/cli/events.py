"""Progress while a run works: counters fed by every sample, shown to people as a live view on
stderr and to scripts as NDJSON events on stdout (``--json``).

The per-sample path is a few counter updates and one clock read; percentiles, redraws and
``progress`` events happen at most every ``every`` seconds. Percentiles shown while running
are *provisional*: over the measured tasks finished so far, successful ones only.

Event schema (one JSON object per line; every event has ``event``, ``run_id``, ``ts`` (UTC,
ISO 8601) and ``elapsed_s``):

- ``run_started``: ``target``, ``suite``, ``load``, ``planned_tasks``
- ``phase_changed``: ``phase`` (warmup | measured), ``run`` (index), ``tasks`` (in this pass;
  0 for a pass bounded by time, ``--duration`` with ``-c`` or ``--stages``)
- ``task_finished``: ``phase``, ``run``, ``case``, ``iteration``, ``status``, ``latency_s``,
  ``ttft_s``, ``tokens_in``, ``tokens_out``, ``error_kind``
- ``progress``: the :meth:`Progress.snapshot` fields (``done``, ``planned``, ``ok``,
  ``errors``, ``rate_limited`` (tasks that ended refused), ``answers_429`` (429 answers, retried
  or not), ``tasks_per_s``, ``concurrency``, ``limit``,
  ``p50_s``/``p95_s`` (provisional), ``eta_s``)
- ``level_finished`` (sweeps): ``level``, ``throughput``, ``p95_s``, ``error_rate``,
  ``throttle_rate``, ``run_id`` of the level
- ``run_finished``: ``status``, ``exit_code``, ``counts`` (tasks recorded by this process, by
  status, measured and warmup together as in samples.jsonl), ``run_dir``, and ``headline``:
  the run's figures as ``perfbench list`` shows them (``tasks``, ``ok``, ``p50``, ``p95`` in
  seconds, ``throughput`` in tasks/s; medians across runs), read from its meta.json, so a
  script needs no other file; null when the run wrote none
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

import orjson
from rich.console import Console
from rich.live import Live
from rich.text import Text

from perfbench.engine.observer import Engine, RunObserver
from perfbench.sample import STATUSES, Phase, Sample
from perfbench.spec import RunSpec
from perfbench.stats import abort as limits
from perfbench.stats.abort import AbortOn
from perfbench.stats.histogram import Histogram

Snapshot = dict[str, Any]


class Sink(Protocol):
    """Where progress goes: the live view, the event stream, or both."""

    def started(self, meta: dict[str, Any], snap: Snapshot) -> None: ...
    def phase(self, phase: Phase, run: int, tasks: int, snap: Snapshot) -> None: ...
    def task(self, sample: Sample, snap_elapsed: float) -> None: ...
    def tick(self, snap: Snapshot) -> None: ...
    def finished(
        self, status: str, exit_code: int, run_dir: str | None, snap: Snapshot
    ) -> None: ...


class Progress(RunObserver):
    """Counts what the run has done; tells its sinks on each sample and every ``every`` s. As
    a ``RunObserver`` it watches a run (or each level of a sweep) by itself."""

    def __init__(
        self,
        sinks: list[Sink],
        *,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        limit: Callable[[], float | None] = lambda: None,
        in_flight: Callable[[], int | None] = lambda: None,
        abort: AbortOn | None = None,
    ) -> None:
        self.sinks, self.every, self.clock, self.limit = sinks, every, clock, limit
        # Tasks in flight now, from the runner (with workers: all of them); None: the latest
        # sample's count, which is one process's.
        self.in_flight = in_flight
        self.planned: int | None = None
        self.counts = dict.fromkeys(STATUSES, 0)
        self.done = 0
        self.answers_429 = 0  # 429 answers (a task retried three times counts three)
        self.concurrency = 0
        self.latency = Histogram()
        self.t0 = clock()
        self._next = self.t0 + every
        self._wants_tasks = [s for s in sinks if getattr(s, "wants_tasks", False)]
        self.phase_name = "starting"
        self.abort = abort
        self.aborted: str | None = None  # the limit that stopped the run, as stopped_by
        self._stop: Callable[[str | None], None] = lambda reason: None
        self._measured: tuple[float, int, int] | None = None  # since: when, done, ok
        self._timed: float | None = None  # seconds of measurement when the time bounds it

    def controls(self, stop: Callable[[str | None], None]) -> None:
        self._stop = stop

    def run_started(self, meta: Mapping[str, Any], planned: int, engine: Engine) -> None:
        self.planned = planned
        self.limit, self.in_flight = engine.limit, engine.tasks_in_flight
        self.started(dict(meta))

    def pass_started(self, phase: Phase, run: int, tasks: int) -> None:
        self.phase(phase, run, tasks)

    def wants_samples(self) -> bool:
        # --quiet: nobody watches, no sample needs decoding (unless limits are checked)
        return bool(self.sinks) or self.abort is not None

    def started(self, meta: dict[str, Any]) -> None:
        """A run begins: counting starts afresh (a sweep reuses one Progress per level)."""
        self.counts = dict.fromkeys(STATUSES, 0)
        self.done, self.concurrency, self.answers_429 = 0, 0, 0
        self.latency = Histogram()
        self.t0 = self.clock()
        self._next = self.t0 + self.every
        self._measured = None
        self._timed = timed_measurement(meta)
        for sink in self.sinks:
            sink.started(meta, self.snapshot())

    def phase(self, phase: Phase, index: int, tasks: int) -> None:
        self.phase_name = f"{phase} {index + 1}" if phase == "measured" else phase
        if phase == "measured" and self._measured is None:
            self._measured = (self.clock(), self.done, self.counts["ok"])
        for sink in self.sinks:
            sink.phase(phase, index, tasks, self.snapshot())

    def sample(self, s: Sample) -> None:
        self.done += 1
        self.counts[s.status] += 1
        self.answers_429 += s.throttled
        self.concurrency = s.concurrency
        if s.status == "ok" and s.phase == "measured":
            self.latency.add(s.end - s.start)
        now = self.clock()
        for sink in self._wants_tasks:
            sink.task(s, now - self.t0)
        if now >= self._next:
            self._next = now + self.every
            self.tick()

    def tick(self) -> None:
        snap = self.snapshot()
        for sink in self.sinks:
            sink.tick(snap)
        if self.abort is not None and self.aborted is None and self._measured is not None:
            self._check(self.abort, *self._measured)

    def _check(self, abort: AbortOn, since: float, done_before: int, ok_before: int) -> None:
        """Stop the run when the measured tasks so far cross an --abort-on limit."""
        done, ok = self.done - done_before, self.counts["ok"] - ok_before
        figures = limits.figures(done, ok, self.latency.percentiles(limits.PERCENTILES))
        crossed = abort.crossed(figures, self.clock() - since, done)
        if crossed is not None:
            value = figures[crossed.metric]
            assert value is not None
            self.aborted = "abort-on: " + limits.describe(crossed, value)
            self._stop(self.aborted)

    def finished(self, status: str, exit_code: int, run_dir: str | None) -> None:
        snap = self.snapshot()
        for sink in self.sinks:
            sink.finished(status, exit_code, run_dir, snap)

    def _concurrency(self) -> int:
        live = self.in_flight()
        return self.concurrency if live is None else live

    def _eta(self, left: int | None, rate: float | None) -> float | None:
        """Seconds to go: the tasks left at the rate so far; for a run bounded by time, the
        measurement's time left (none in its warmup, whose length no one knows)."""
        if self._timed is None:
            return left / rate if rate and left is not None else None
        if self._measured is None:
            return None
        return max(0.0, self._measured[0] + self._timed - self.clock())

    def snapshot(self) -> Snapshot:
        elapsed = self.clock() - self.t0
        rate = self.done / elapsed if elapsed > 0 else None
        left = None if self.planned is None else max(0, self.planned - self.done)
        pcts = self.latency.percentiles((50.0, 95.0))
        return {
            "phase": self.phase_name,
            "done": self.done,
            "planned": self.planned,
            "counts": dict(self.counts),
            "ok": self.counts["ok"],
            "errors": self.counts["error"] + self.counts["timeout"],
            "rate_limited": self.counts["rate_limited"],
            "answers_429": self.answers_429,
            "tasks_per_s": rate,
            "concurrency": self._concurrency(),
            "limit": self.limit(),
            "p50_s": pcts.get(50.0),
            "p95_s": pcts.get(95.0),
            "elapsed_s": elapsed,
            "eta_s": self._eta(left, rate),
        }


class JsonEvents:
    """NDJSON on a byte stream, one event per line, flushed so a reader sees it at once."""

    wants_tasks = True

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.run_id: str | None = None

    def emit(self, event: str, elapsed: float, **fields: Any) -> None:
        doc = {
            "event": event,
            "run_id": self.run_id,
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "elapsed_s": round(elapsed, 6),
            **fields,
        }
        self.stream.write(orjson.dumps(doc) + b"\n")
        self.stream.flush()

    def started(self, meta: dict[str, Any], snap: Snapshot) -> None:
        self.run_id = meta.get("id")
        suite = meta.get("suite", {})
        self.emit(
            "run_started",
            snap["elapsed_s"],
            target=meta.get("target"),
            suite={"name": suite.get("name"), "digest": suite.get("digest")},
            load=meta.get("load"),
            planned_tasks=snap["planned"],
        )

    def phase(self, phase: Phase, run: int, tasks: int, snap: Snapshot) -> None:
        self.emit("phase_changed", snap["elapsed_s"], phase=phase, run=run, tasks=tasks)

    def task(self, s: Sample, elapsed: float) -> None:
        self.emit(
            "task_finished",
            elapsed,
            phase=s.phase,
            run=s.run,
            case=s.case,
            iteration=s.iteration,
            status=s.status,
            latency_s=s.end - s.start,
            ttft_s=s.ttft,
            tokens_in=s.tokens_in,
            tokens_out=s.tokens_out,
            error_kind=s.error_kind,
        )

    def tick(self, snap: Snapshot) -> None:
        self.emit(
            "progress", snap["elapsed_s"], **{k: v for k, v in snap.items() if k != "elapsed_s"}
        )

    def finished(self, status: str, exit_code: int, run_dir: str | None, snap: Snapshot) -> None:
        self.tick(snap)  # the last progress: final counts and provisional percentiles
        self.emit(
            "run_finished",
            snap["elapsed_s"],
            status=status,
            exit_code=exit_code,
            counts=snap["counts"],
            run_dir=run_dir,
            headline=_headline(run_dir),
        )


def _headline(run_dir: str | None) -> Any:
    """The headline the run wrote into its meta.json (written before this event), or None."""
    if run_dir is None:
        return None
    try:
        meta = json.loads((Path(run_dir) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("headline") if isinstance(meta, dict) else None


class LiveView:
    """Progress for people on stderr: a redrawn status line on a terminal; elsewhere (CI logs,
    pipes) a plain line at each phase and every ``plain_every`` seconds, never escape codes."""

    wants_tasks = False

    def __init__(self, console: Console, plain_every: float = 10.0) -> None:
        self.console = console
        self.plain_every = plain_every
        self._live: Live | None = None
        self._last_plain = -plain_every
        self._timed: float | None = None  # seconds of a measured pass bounded by time

    def started(self, meta: dict[str, Any], snap: Snapshot) -> None:
        self._timed = timed_pass(meta)
        ray = meta.get("ray")
        if ray:  # starting actors takes a while: say what is starting
            self.console.print(
                f"Ray ({ray.get('address')}): starting {ray.get('actors')} actors",
                style="dim",
                highlight=False,
                markup=False,
            )
        if self.console.is_terminal:
            self._live = Live(
                self._line(snap), console=self.console, refresh_per_second=4, transient=True
            )
            self._live.start()

    def phase(self, phase: Phase, run: int, tasks: int, snap: Snapshot) -> None:
        if phase == "warmup":
            header = f"warmup: {tasks} tasks"
        elif self._timed is not None:  # its tasks are as many as the time allows
            header = f"run {run + 1}: tasks for {self._timed:g} s"
        else:
            header = f"run {run + 1}: {tasks} tasks"
        self.console.print(header, style="dim", highlight=False)
        if self._live is not None:
            self._live.update(self._line(snap))

    def task(self, s: Sample, elapsed: float) -> None:
        pass

    def tick(self, snap: Snapshot) -> None:
        if self._live is not None:
            self._live.update(self._line(snap))
        elif snap["elapsed_s"] - self._last_plain >= self.plain_every:
            self._last_plain = snap["elapsed_s"]
            self.console.print(self._line(snap), highlight=False)

    def finished(self, status: str, exit_code: int, run_dir: str | None, snap: Snapshot) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @staticmethod
    def _line(snap: Snapshot) -> Text:
        return Text(describe(snap))


def timed_pass(meta: Mapping[str, Any]) -> float | None:
    """The seconds each measured pass starts tasks for: a closed loop with --duration (its
    share of it) or --stages; None when a pass is a count of tasks (the phase events' ``tasks``
    is 0 for a timed pass: how many, the time decides)."""
    spec = meta.get("spec")
    if not isinstance(spec, Mapping):
        return None
    return RunSpec.from_doc(spec).plan.pass_seconds("measured")


def timed_measurement(meta: Mapping[str, Any]) -> float | None:
    """The seconds a run bounded by time measures in all: its passes' time × its runs."""
    seconds = timed_pass(meta)
    return None if seconds is None else seconds * int(meta["spec"]["plan"]["runs"])


def describe(snap: Snapshot) -> str:
    """One status line: where the run is, how fast, how healthy, how long to go."""
    planned = snap["planned"]
    done = f"{snap['done']}/{planned}" if planned else str(snap["done"])
    rate = snap["tasks_per_s"]
    limit = f" (limit {snap['limit']:g})" if snap["limit"] is not None else ""
    parts = [
        f"{snap['phase']}: {done} tasks",
        f"{rate:.1f}/s" if rate else "–/s",
        f"in flight {snap['concurrency']}{limit}",
        f"errors {snap['errors']}",
        f"refused {snap['rate_limited']} (429 answers {snap['answers_429']})",
    ]
    if snap["p50_s"] is not None:
        parts.append(
            f"P50 {1e3 * snap['p50_s']:.0f} ms P95 {1e3 * snap['p95_s']:.0f} ms (provisional)"
        )
    parts.append(f"elapsed {_clock(snap['elapsed_s'])}")
    if snap["eta_s"] is not None:
        parts.append(f"left ~{_clock(snap['eta_s'])}")
    return " · ".join(parts)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
