"""``perfbench list``: the stored runs, one row each, newest last."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from perfbench import store
from perfbench.cli.app import app
from perfbench.cli.output import err, out
from perfbench.report.format import seconds

RootOpt = Annotated[Path, typer.Option("--root", help="Folder that holds run directories.")]


@app.command("list")
def list_(
    folder: Annotated[
        Path | None, typer.Argument(help="Folder of run directories (or use --root).")
    ] = None,
    root: RootOpt = Path("runs"),
) -> None:
    """List runs (newest last) from their meta.json: time, suite, target, label, P50/P95."""
    root = folder or root
    runs, damaged = store.scan_runs(root)
    for problem in damaged:  # not runs, but the user should know they are there and why
        err.print(f"[yellow]left out:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
    if not runs:
        err.print(f"No runs in {root}/. Start one with: perfbench run cases/")
        return
    out.print(_runs_table(runs))
    if any(store.status(info.meta) == "killed" for info in runs):
        err.print(
            "A killed run keeps what it measured: continue it with perfbench run --resume DIR"
        )


def _runs_table(runs: list[store.RunInfo]) -> Table:
    """One row per run. The run's name is what `show` and `compare` take, and directory names
    are long (a timestamp, the suite, the target, the label), so it is never cut: it has the
    wide column, folded onto more lines when the terminal is narrower, and when, what and
    where it ran sit on the line below it instead of in columns of their own."""
    table = Table()
    table.add_column("run", overflow="fold", ratio=1)
    for col in ("tasks", "P50", "P95"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for info in runs:
        m = info.meta
        head = m.get("headline") or {}
        table.add_row(
            _run_cell(info),
            str(head.get("tasks", "–")),
            seconds(head.get("p50")),
            seconds(head.get("p95")),
            store.status(m),
        )
    return table


def _run_cell(info: store.RunInfo) -> Text:
    m = info.meta
    started = str(m.get("started_at", ""))[:16].replace("T", " ")  # to the minute
    what = [started, str(m.get("suite", {}).get("name", "")), str(m.get("target", ""))]
    if m.get("label"):
        what.append(f"label={m['label']}")
    cell = Text(info.path.name, style="bold", overflow="fold")
    cell.append("\n  " + " · ".join(p for p in what if p), style="dim")
    return cell
