"""What the commands print, and how perfbench's own failures end a command: a message, never
a traceback (exit code 3).

Text perfbench did not write (a case id, a file name, a flag's value, a server's error message)
may hold control characters: a newline or an ANSI escape would end the line early or move the
cursor, and forge a line that reads as perfbench's own, such as a second ``error:``. The
consoles here show every control character escaped (``\\x1b``), in tables too, but newlines,
which lay out what they print; ``error`` and ``warning`` escape those too (``clean``): one
message, one line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from perfbench.errors import CaseError, PerfbenchError, StoreError
from perfbench.report import console as tables
from perfbench.report import time_split
from perfbench.stats.advice import advise
from perfbench.stats.compare import Comparison
from perfbench.stats.thresholds import ThresholdResult

CONFIG_EXIT = 3  # ExitCode.CONFIG (cli.app imports this module)

# Characters that act on a terminal rather than show: C0 and C1 controls and DEL (newline,
# carriage return, ESC…), the Unicode line and paragraph separators, and the bidirectional
# embeddings, overrides and isolates, which reorder what follows them on the line.
_CONTROLS = (
    *range(0x20),
    *range(0x7F, 0xA0),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
# Each as Python writes it in a string literal (\n, \x1b, \u202e): readable, and unambiguous
# to anyone reporting the message.
_ESCAPED = {code: repr(chr(code))[1:-1] for code in _CONTROLS}
_ESCAPED_BUT_NEWLINES = {code: shown for code, shown in _ESCAPED.items() if code != ord("\n")}


def clean(text: str) -> str:
    """``text`` with its control characters escaped: safe to print as (part of) one line."""
    return text.translate(_ESCAPED)


class SafeConsole(Console):
    """A console that shows the control characters in the text it prints instead of sending
    them to the terminal: an ANSI escape in a server's error message (a table cell) could
    otherwise erase the line and write another. Its own styling is unaffected (rich adds that
    from each segment's style, and sends cursor movements as control segments)."""

    def render_str(self, text: str, **options: Any) -> Text:
        # Strings (and table cells) become Text here, before rich measures them: escaped
        # now, a cell is as wide as what it shows. Newlines stay rich's to lay out.
        return super().render_str(text.translate(_ESCAPED_BUT_NEWLINES), **options)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        # Text built elsewhere, from raw text, reaches the terminal through here: escaped
        # once measured, so perhaps cut short, but never obeyed.
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable():
                yield segment
            else:
                yield Segment(segment.text.translate(_ESCAPED_BUT_NEWLINES), segment.style)


def console(stderr: bool = False) -> Console:
    # Off a terminal (CI logs, pipes) rich assumes 80 columns and squeezes the tables; logs
    # can take wider lines. COLUMNS, when set, still wins.
    found = SafeConsole(stderr=stderr)
    if not found.is_terminal and "COLUMNS" not in os.environ:
        found = SafeConsole(stderr=stderr, width=120)
    return found


out = console()
err = console(stderr=True)


def _labelled(label: str, style: str, message: str) -> Text:
    # As Text, not markup: messages quote user input such as '[a-z]' verbatim.
    return Text.assemble((label, style), clean(message))


def error(message: str) -> None:
    # soft_wrap: a file:line: field: message line stays one line, whatever the width.
    err.print(_labelled("error: ", "bold red", message), highlight=False, soft_wrap=True)


@contextmanager
def errors() -> Iterator[None]:
    """perfbench's own failures end the command with a message, never a traceback."""
    try:
        yield
    except BaseExceptionGroup as group:  # raised inside a task group: unwrap ours
        ours, rest = group.split(PerfbenchError)
        if ours is None or rest is not None:
            raise
        _report(_first_leaf(ours))
        raise typer.Exit(CONFIG_EXIT) from None
    except PerfbenchError as exc:
        _report(exc)
        raise typer.Exit(CONFIG_EXIT) from None


def _report(exc: BaseException) -> None:
    # A case error's problems are one line each; any other message is one line whole, as a
    # newline in it came from its input (error() escapes it).
    problems = exc.problems if isinstance(exc, CaseError) else [exc]
    for problem in problems:
        error(str(problem))


def _first_leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


# What a run prints, in order: each entry gives a renderable or None (nothing to show). The
# default screen is SCREEN, then warnings, then the headline last, where the terminal leaves
# it; --details prints DETAILS instead of SCREEN. A table or note for every run is one entry.
Section = Callable[[Mapping[str, Any], Mapping[str, Any]], RenderableType | None]
SCREEN: tuple[Section, ...] = (
    lambda summary, meta: tables.notes(summary, meta),
    tables.case_summary,
    lambda summary, meta: _agent_split(summary, meta),
    lambda summary, meta: tables.failure_table(summary),
)
DETAILS: tuple[Section, ...] = (
    lambda summary, meta: tables.notes(summary, meta, details=True),
    tables.case_table,
    lambda summary, meta: tables.language_table(summary),
    tables.cost_table,
    lambda summary, meta: tables.cost_table(summary, meta, "tags"),
    lambda summary, meta: tables.run_table(summary),
    lambda summary, meta: time_split.table(summary),
    lambda summary, meta: tables.serving_table(summary),
    lambda summary, meta: tables.failure_table(summary),
)


def _agent_split(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> RenderableType | None:
    """The time split on the short screen where an agent spent time of its own (a `cmd:` or
    HTTP agent): there it is the first question (start-up or model?); and where tasks missed
    their case's expect, for its per-case success rate and cost per success (the case
    table's ok/tasks counts them as ok). For a model endpoint whose tasks all succeeded the
    case table already says it, and --details has it."""
    agent = str(meta.get("target", "")).startswith(("cmd:", "http+agent"))
    missed = summary["pooled"]["overall"].get("expect_mismatch")
    return time_split.table(summary) if agent or missed else None


def print_result(
    summary: Mapping[str, Any],
    meta: Mapping[str, Any],
    where: Console = out,
    details: bool = False,
    footer: Iterable[RenderableType] = (),
    run_dir: Path | None = None,
) -> None:
    """A run's tables, warnings, its directory, ``footer`` (how it ended) and headline, as
    `run` and `show` print them."""
    if summary["runs"]:
        for section in DETAILS if details else SCREEN:
            shown = section(summary, meta)
            if shown is not None:
                where.print(shown)
    print_warnings(advise(summary, meta), where, details)
    if run_dir is not None:
        where.print(run_directory(run_dir, details), highlight=False)
    for line in footer:  # a no_wrap Text is a command to copy: never broken over lines
        where.print(line, highlight=False, soft_wrap=isinstance(line, Text) and bool(line.no_wrap))
    if summary["runs"]:
        where.print(tables.headline(summary, meta), highlight=False)
    else:
        where.print(tables.what_ran(meta, 0), highlight=False, markup=False)


SCREEN_WARNINGS = 2  # warnings the short screen shows in full; advise() puts the gravest first


def print_warnings(notes: Sequence[str], where: Console, details: bool) -> None:
    """Every warning with --details; on the short screen the first SCREEN_WARNINGS and one line
    saying how many more there are and where to read them, so that a run on a busy machine
    still fits one screen."""
    shown = notes if details or len(notes) <= SCREEN_WARNINGS + 1 else notes[:SCREEN_WARNINGS]
    for note in shown:
        warning(note, where)
    hidden = len(notes) - len(shown)
    if hidden:
        # The run directory is printed below; a long path here would wrap over three lines.
        message = f"{hidden} more warning(s): perfbench show RUN_DIR --details prints them all"
        where.print(_labelled("warning: ", "yellow", message), highlight=False)


def run_directory(run_dir: Path | None, details: bool) -> Text:
    """Where the run is, and (on the short screen) how to see every table of it."""
    line = Text.assemble("Run directory: ", (str(run_dir), "bold"))
    if run_dir is not None and not details:
        line.append(" (--details: every table)", style="dim")
    return line


def warning(message: str, where: Console = err) -> None:
    # Not soft-wrapped: a warning is a sentence or two, wrapped to the terminal.
    where.print(_labelled("warning: ", "yellow", message), highlight=False)


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
