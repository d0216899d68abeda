"""The typer app and its command groups, and the exit codes scripts rely on. The commands are
in ``run`` (run, sweep, calibrate), ``results`` (list, show, compare, report, export), ``mock``
and ``cases``; ``options`` declares the flags ``run`` and ``sweep`` share."""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated

import typer

from perfbench.cli.output import out
from perfbench.version import __version__


class ExitCode(IntEnum):
    """Documented in the README; scripts and CI gates rely on these numbers."""

    OK = 0
    USAGE = 2  # bad command line (typer/click's own code)
    CONFIG = 3  # bad case file, profile, target or run directory; perfbench could not work
    REGRESSION = 4  # compare: the candidate is significantly worse on a gated metric
    THRESHOLD = 5  # compare: an absolute threshold (--threshold p95<2s) is breached
    INCONCLUSIVE = 6  # compare --strict: a big change that more runs must confirm
    CLIENT_BOUND = 7  # run --strict: perfbench itself may have set the pace (lag, CPU, ceiling)
    ERRORS = 8  # run, sweep (its lowest level): more tasks failed than --max-error-rate allows
    ABORTED = 9  # run --abort-on: a limit was crossed while it worked; what was measured is kept
    INTERRUPTED = 130  # stopped with Ctrl-C; what was measured is kept
    TERMINATED = 143  # stopped by SIGTERM (a CI job cancelled, `timeout`); likewise kept


app = typer.Typer(
    help="Measure the latency, throughput, tokens and cost of LLM agents and LLM APIs.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
cases_app = typer.Typer(help="Inspect and validate case suites.", no_args_is_help=True)
app.add_typer(cases_app, name="cases")
mock_app = typer.Typer(
    help="The mock agent server: OpenAI- and Anthropic-compatible HTTP on loopback.",
    no_args_is_help=True,
)
app.add_typer(mock_app, name="mock")
slo_app = typer.Typer(
    help="Named service-level objectives for --slo (MLPerf's, GuideLLM's).", no_args_is_help=True
)
app.add_typer(slo_app, name="slo")


def _version(value: bool) -> None:
    if value:
        out.print(f"perfbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
) -> None:
    """Measure the latency, throughput, tokens and cost of LLM agents and LLM APIs.

    Start with [bold]perfbench run cases/[/]: it runs the example suite against the embedded
    mock agent (no API key) and leaves a run directory in runs/.
    """
