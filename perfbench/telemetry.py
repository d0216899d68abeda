"""Live telemetry: a run's counters on a Prometheus ``/metrics`` page while it works (``run
--metrics-port P``), for a Grafana board, as k6, Locust and AIPerf offer theirs.

A progress sink (``events.Sink``): every finished task updates prometheus-client's counters and
histograms, each progress tick the gauges (tasks in flight, the adaptive limit). The page is
served on 127.0.0.1 only, from the run's start to its end, by prometheus-client's own server
thread; what a run measured in the end is its summary.json, not the last scrape. The metric
names are the contract of docs/grafana/perfbench.json (tests/unit/test_telemetry.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from perfbench.errors import PerfbenchError
from perfbench.sample import Phase, Sample

HOST = "127.0.0.1"
# Seconds: from a cached answer (5 ms) to an agent's minutes-long task.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)


class Telemetry:
    """The run's metrics, served on ``HOST:port`` between ``started`` and ``finished``.
    ``every_run``: served until ``close`` instead, across the runs it watches (a sweep's
    levels: one page, whose counters go on adding up, for the whole sweep)."""

    wants_tasks = True

    def __init__(self, port: int, *, every_run: bool = False) -> None:
        self.port = port
        self.every_run = every_run
        self.registry = CollectorRegistry()
        r = self.registry
        labels = ("phase", "status")
        self.finished_tasks = Counter(
            "perfbench_tasks_finished", "Tasks finished, by phase and status.", labels, registry=r
        )
        self.failed = Counter(
            "perfbench_tasks_failed",
            "Tasks that did not succeed, by phase and kind of failure.",
            ("phase", "kind"),
            registry=r,
        )
        self.answers_429 = Counter(
            "perfbench_http_429_answers", "429 answers received (retried or not).", registry=r
        )
        self.in_flight = Gauge("perfbench_tasks_in_flight", "Tasks running now.", registry=r)
        self.limit = Gauge(
            "perfbench_concurrency_limit",
            "The concurrency limit now: the adaptive limit, else the fixed -c (0: open loop).",
            registry=r,
        )
        self.latency = Histogram(
            "perfbench_task_latency_seconds",
            "Task latency (start to end, every step), successful tasks.",
            ("phase",),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "perfbench_ttft_seconds",
            "Time to first token of a task's first model call.",
            ("phase",),
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "perfbench_tokens", "Tokens, in and out.", ("phase", "direction"), registry=r
        )
        self.cost = Counter(
            "perfbench_cost_dollars", "Cost of the tasks' tokens, USD (priced ones).", registry=r
        )
        self.run_info = Gauge(
            "perfbench_run_info", "The run being measured (always 1).", ("run_id", "target"),
            registry=r,
        )  # fmt: skip
        self._started = _Started(self)
        r.register(self._started)
        self.done = 0
        # Tasks in flight: the engine's count at the last tick, less the tasks finished since
        # (one started since is seen at the next tick), so that a task is not counted both
        # finished and running, and the tasks started (finished + running) not twice.
        self.running = 0
        self.started_seen = 0  # the tasks started as last served: a counter never goes down
        self._fixed: int | None = None
        self._server: WSGIServer | None = None

    def open(self) -> None:
        """Serve the page (before the run starts: a busy port stops it before any task)."""
        if self._server is None:
            self._server = serve(self.port, self.registry)

    def started(self, meta: dict[str, Any], snap: dict[str, Any]) -> None:
        load = meta.get("load") or {}
        self._fixed = load.get("concurrency") if load.get("shape") == "fixed" else None
        self.run_info.clear()  # the run being measured now: a sweep's previous level is done
        self.run_info.labels(str(meta.get("id")), str(meta.get("target"))).set(1)
        self.tick(snap)
        self.open()

    def phase(self, phase: Phase, run: int, tasks: int, snap: dict[str, Any]) -> None:
        self.tick(snap)

    def task(self, s: Sample, elapsed: float) -> None:
        self.done += 1
        self.running = max(0, self.running - 1)
        self.in_flight.set(self.running)
        self.finished_tasks.labels(s.phase, s.status).inc()
        if s.status != "ok":
            self.failed.labels(s.phase, s.error_kind or s.status).inc()
        else:
            self.latency.labels(s.phase).observe(s.end - s.start)
        if s.ttft is not None:
            self.ttft.labels(s.phase).observe(s.ttft)
        if s.throttled:
            self.answers_429.inc(s.throttled)
        for direction, count in (("in", s.tokens_in), ("out", s.tokens_out)):
            if count:
                self.tokens.labels(s.phase, direction).inc(count)
        if s.cost:
            self.cost.inc(s.cost)

    def tick(self, snap: dict[str, Any]) -> None:
        self.running = snap.get("concurrency") or 0
        self.in_flight.set(self.running)
        limit = snap.get("limit")
        self.limit.set(limit if limit is not None else (self._fixed or 0))

    def finished(
        self, status: str, exit_code: int, run_dir: str | None, snap: dict[str, Any]
    ) -> None:
        self.tick(snap)
        # Every task has ended: finished + in flight is exact now, whatever a tick held.
        self.started_seen = self.done + self.running
        if not self.every_run:
            self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Started(Collector):
    """Tasks started: those finished and those in flight (a task is seen when it ends)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    def collect(self) -> Iterator[CounterMetricFamily]:
        t = self.telemetry
        # With workers, the in-flight count is their latest samples' (an estimate): the
        # counter is held at its highest, as Prometheus reads a fall as a restart.
        t.started_seen = max(t.started_seen, t.done + t.running)
        yield CounterMetricFamily(
            "perfbench_tasks_started", "Tasks started (finished + in flight).", t.started_seen
        )


def serve(port: int, registry: CollectorRegistry) -> WSGIServer:
    """prometheus-client's server for ``registry`` on ``HOST:port``, in its own thread."""
    try:
        server, _ = start_http_server(port, addr=HOST, registry=registry)
    except OSError as exc:
        raise PerfbenchError(
            f"--metrics-port {port}: cannot listen on {HOST}:{port} ({exc.strerror or exc}); "
            "choose a free port"
        ) from None
    return server
