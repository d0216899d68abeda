"""``perfbench cases check``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from perfbench.cli.app import cases_app
from perfbench.cli.output import errors, out
from perfbench.suite import load_suite

CasesArg = Annotated[
    list[Path],
    typer.Argument(help="Case files or folders (searched recursively for *.yaml, *.yml)."),
]


SHOWN = 200  # rows listed without --all: rich lays a table out at ~2.5 ms a row (10,000: 25 s)


@cases_app.command("check")
def cases_check(
    cases: CasesArg,
    all_rows: Annotated[
        bool, typer.Option("--all", help=f"List every case (default: the first {SHOWN}).")
    ] = False,
) -> None:
    """Validate case files and print the cases; errors name file, line and field."""
    with errors():
        suite = load_suite(cases)
    table = Table(title=f"{suite.name}: {len(suite.cases)} cases, digest {suite.digest[:12]}")
    for col in ("id", "lang", "tools", "calls", "tags", "timeout", "source"):
        table.add_column(col, no_wrap=col in ("id", "source"))
    shown = suite.cases if all_rows else suite.cases[:SHOWN]
    for c in shown:
        table.add_row(
            c.id,
            c.language,
            str(len(c.tools)),
            str(len(c.expect.tool_calls)) if c.expect.tool_calls else "–",
            ", ".join(c.tags),
            f"{c.timeout_s:g} s",
            suite.sources[c.id],
        )
    out.print(table)
    if len(shown) < len(suite.cases):
        rest = len(suite.cases) - len(shown)
        out.print(f"… and {rest:,} more cases, all valid: add --all to list them.")
