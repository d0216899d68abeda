"""What the commands print, and how perfbench's own failures end a command: a message, never
a traceback (exit code 3)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from perfbench.errors import PerfbenchError, StoreError
from perfbench.report import console as tables
from perfbench.stats.advice import advise
from perfbench.stats.compare import Comparison
from perfbench.stats.thresholds import ThresholdResult

CONFIG_EXIT = 3  # ExitCode.CONFIG (cli.app imports this module)


def console(stderr: bool = False) -> Console:
    # Off a terminal (CI logs, pipes) rich assumes 80 columns and squeezes the tables; logs
    # can take wider lines. COLUMNS, when set, still wins.
    found = Console(stderr=stderr)
    if not found.is_terminal and "COLUMNS" not in os.environ:
        found = Console(stderr=stderr, width=120)
    return found


out = console()
err = console(stderr=True)


def error(message: str) -> None:
    # As Text, not markup: messages quote user input such as '[a-z]' verbatim.
    # soft_wrap: a file:line: field: message line stays one line, whatever the width.
    err.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)


@contextmanager
def errors() -> Iterator[None]:
    """perfbench's own failures end the command with a message, never a traceback."""
    try:
        yield
    except BaseExceptionGroup as group:  # raised inside a task group: unwrap ours
        ours, rest = group.split(PerfbenchError)
        if ours is None or rest is not None:
            raise
        error(str(_first_leaf(ours)))
        raise typer.Exit(CONFIG_EXIT) from None
    except PerfbenchError as exc:
        error(str(exc))
        raise typer.Exit(CONFIG_EXIT) from None


def _first_leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def print_result(summary: Mapping[str, Any], meta: Mapping[str, Any], where: Console = out) -> None:
    """A run's tables and warnings, as `run` and `show` print them."""
    where.print(tables.overview(summary, meta))
    if summary["runs"]:
        where.print(tables.case_table(summary, meta))
        where.print(tables.language_table(summary))
        where.print(tables.cost_table(summary, meta))
        if summary["pooled"].get("tags"):
            where.print(tables.cost_table(summary, meta, "tags"))
        where.print(tables.run_table(summary))
        failures = tables.failure_table(summary)
        if failures is not None:
            where.print(failures)
    for note in advise(summary, meta):
        where.print(f"[yellow]warning:[/] {note}", highlight=False)


def write_text(path: Path, text: str, append: bool = False) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None


def print_verdict_json(
    result: Comparison | None,
    base_meta: Mapping[str, Any],
    cand_meta: Mapping[str, Any],
    checked: list[ThresholdResult],
    verdict: str,
    exit_code: int,
    notes: list[str],
) -> None:
    """The verdict for scripts: the Comparison dataclass as it is (it is the export schema)."""
    doc = {
        "outcome": verdict,
        "exit_code": exit_code,
        "baseline": base_meta["id"] if result is not None else None,
        "candidate": cand_meta["id"],
        "comparison": asdict(result) if result is not None else None,
        "thresholds": [asdict(t) for t in checked],
        "notes": notes,
    }
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
