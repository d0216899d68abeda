"""The ``perfbench`` command: parses flags into a spec, calls the library (``perfbench.api``),
prints, and maps outcomes to exit codes (``app.ExitCode``). Commands live in ``run``,
``results``, ``calibrate``, ``mock`` and ``cases``; the flags ``run`` and ``sweep`` share, in
``options``."""

from __future__ import annotations

import inspect
import sys

import typer

from perfbench.cli import calibrate, cases, mock, results, run
from perfbench.cli.app import ExitCode, app, cases_app, mock_app

__all__ = ["ExitCode", "app", "main"]
_COMMANDS = (calibrate, cases, mock, results, run)  # imported for their commands


def _reflow(doc: str) -> str:
    """A docstring as help: each paragraph one line, for rich to wrap to the terminal. typer
    keeps a docstring's line breaks after its first paragraph, so a paragraph written for an
    editor's width came out ragged in a narrower terminal."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _reflow_help(*apps: typer.Typer) -> None:
    for each in apps:
        for command in each.registered_commands:
            if command.help is None and command.callback is not None:
                command.help = _reflow(command.callback.__doc__ or "")


# --help lists the commands in the order a user meets them, not the modules' import order.
_ORDER = ("run", "sweep", "list", "show", "compare", "report", "export", "calibrate")


def _name(command: typer.models.CommandInfo) -> str:
    return command.name or (command.callback.__name__ if command.callback else "")


app.registered_commands.sort(key=lambda c: _ORDER.index(_name(c)))
_reflow_help(app, cases_app, mock_app)


def main() -> None:
    sys.exit(app())
