"""``perfbench calibrate``: measure perfbench's own ceiling on this machine, and show it."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import typer
from rich.table import Table

from perfbench import host
from perfbench.cli.app import app
from perfbench.cli.output import err, errors, out
from perfbench.errors import PerfbenchError


@app.command()
def calibrate(
    path: Annotated[
        str,
        typer.Option(
            "--path",
            "-p",
            help="http (the HTTP client and agent loop: model, mock+http and http+agent "
            "targets), in-process (mock and python: targets), or all.",
        ),
    ] = "all",
    tasks: Annotated[
        int, typer.Option(min=100, help="Short tasks measured per path (streams: a sixth).")
    ] = 3000,
    show: Annotated[
        bool, typer.Option("--show", help="Print what is stored; measure nothing.")
    ] = False,
) -> None:
    """Measure perfbench's own ceiling on this machine against the zero-latency mock, and store it.

    One worker, no latency anywhere: what is measured is the client. Short non-streaming calls
    at 64 in flight (calls/s, client CPU per call) and 200-token streams at 16 in flight
    (streamed tokens/s). Every later run compares its load per worker with these figures and
    warns (exit 7 with [bold]run --strict[/]) above 70% of them. Stored per machine in
    ~/.cache/perfbench/calibration.json ($PERFBENCH_CALIBRATION to choose the file).
    """
    from perfbench.store import machine

    kinds = ("http", "in-process") if path == "all" else (path,)
    if any(k not in ("http", "in-process") for k in kinds):
        raise typer.BadParameter("--path takes http, in-process or all")
    with errors():
        if not show:
            _measure(kinds, tasks)
        found = machine.load()
        if not found:
            where = machine.path()
            raise PerfbenchError(f"nothing is calibrated in {where}: run perfbench calibrate")
    out.print(_ceilings(found))


def _measure(kinds: tuple[str, ...], tasks: int) -> None:
    from perfbench import calibrate as calibration
    from perfbench.store import machine

    for kind in kinds:
        err.print(f"Calibrating the {kind} path ({tasks:,} short tasks, then streams)…")
        figures = anyio.run(calibration.measure, kind, tasks, backend_options=host.loop_options())
        stored = machine.save(kind, figures)
    err.print(f"Stored in [bold]{stored}[/]", highlight=False)


def _ceilings(found: dict[str, Any]) -> Table:
    table = Table(title="perfbench's ceiling per worker on this machine")
    for col in ("path", "calls/s", "CPU ms/call", "streamed tokens/s", "measured", "version"):
        table.add_column(col, justify="left" if col in ("path", "measured") else "right")
    for kind, f in sorted(found.items()):
        table.add_row(
            kind,
            f"{f['calls_per_s']:,.0f}",
            f"{f['cpu_ms_per_call']:.3f}",
            f"{f['stream_tokens_per_s']:,.0f}",
            str(f["measured_at"]),
            str(f["perfbench_version"]),
        )
    return table
