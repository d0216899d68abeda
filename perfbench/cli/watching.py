"""How a run is watched and shown, beside what it measures: the one screen or every table
(``--details``), live metrics (``--metrics-port``) and the limits that stop it (``--abort-on``).
The flags are a group for ``options.shared``; ``shown`` turns their values into a ``Shown``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

import typer

from perfbench.cli.events import Sink
from perfbench.cli.options import Flags, _flag
from perfbench.stats import abort as limits
from perfbench.stats.abort import AbortOn

DETAILS_HELP = (
    "Print every table (per language, cost per language and tag, per run, streaming) "
    "instead of the one-screen summary; summary.json and the report always have them."
)
DetailsOpt = Annotated[bool, typer.Option("--details", help=DETAILS_HELP)]

WATCHING = (
    _flag("details", False, bool, "--details", panel="Output", help=DETAILS_HELP),
    _flag("metrics_port", None, int | None, "--metrics-port", panel="Output", min=1, max=65535,
          help="Serve Prometheus metrics on http://127.0.0.1:PORT/metrics while the run works "
          "(tasks started, finished and failed by kind, in flight, 429 answers, the "
          "concurrency limit, latency and TTFT histograms, tokens, cost), for a Grafana board: "
          "docs/grafana/perfbench.json, docs/telemetry.md."),
    _flag("abort_on", None, str | None, "--abort-on", panel="Exit code",
          help="Stop the run when the measured tasks so far cross a limit, k6's abortOnFail: "
          "'error_rate>5%,p95>2s' (error_rate, p50, p95, p99). Checked every second after "
          "--abort-grace seconds of measurement and 10 tasks; what was measured is kept, the "
          "output names the limit. Exit 9."),
    _flag("abort_grace", limits.GRACE_S, float, "--abort-grace", panel="Exit code", min=0.0,
          help="Seconds of measurement before --abort-on is checked (k6's delayAbortEval)."),
)  # fmt: skip


@dataclass(frozen=True)
class Shown:
    details: bool = False  # every table, not the one screen
    metrics_port: int | None = None  # --metrics-port: Prometheus /metrics during the run
    abort: AbortOn | None = None  # --abort-on: limits that stop the run


def shown(flags: Flags) -> Shown:
    """The group's values (raises GateError for an --abort-on it cannot read)."""
    text = flags["abort_on"]
    rules = limits.parse(text, flags["abort_grace"]) if text else None
    return Shown(flags["details"], flags["metrics_port"], rules)


@contextmanager
def served(port: int | None, *, every_run: bool = False) -> Iterator[list[Sink]]:
    """--metrics-port: the Prometheus page as a progress sink (none without the flag), served
    before the first task (a busy port stops the command before any) and closed at the end.
    ``every_run``: one page for all the runs watched (a sweep's levels), not each its own."""
    if port is None:
        yield []
        return
    from perfbench.telemetry import Telemetry  # prometheus-client: imported when asked for

    telemetry = Telemetry(port, every_run=every_run)
    try:
        telemetry.open()
        yield [telemetry]
    finally:
        telemetry.close()
