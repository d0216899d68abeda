"""The ``perfbench`` command: parses flags into a spec, calls the library (``perfbench.api``),
prints, and maps outcomes to exit codes (``app.ExitCode``). Commands live in ``run``,
``results``, ``calibrate``, ``mock`` and ``cases``; the flags ``run`` and ``sweep`` share, in
``options``.

This module is the console script's entry (``perfbench.cli:main``, and ``python -m perfbench``
runs it too), so it imports nothing heavy: ``main`` must hold Ctrl-C before the commands'
imports (typer, rich, the engine: about 0.6 s) begin. ``app`` is built on first use."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from functools import cache
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import typer

    from perfbench.cli.app import ExitCode, app

__all__ = ["ExitCode", "app", "main"]

_STOPPED = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


def main() -> NoReturn:
    """Run the command line. A Ctrl-C or SIGTERM at any moment ends it with one line on stderr
    and exit code 130 or 143 (``ExitCode.INTERRUPTED``, ``TERMINATED``), never a traceback."""
    _end_at_once_on_signals()  # while the commands import: nothing to clean up yet
    command = _for(sys.argv[1:2])
    try:
        # A command gets Python's own Ctrl-C: asyncio's runner and `run`'s graceful stop
        # take it over only from Python's default handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        code = command()  # typer ends a command with SystemExit, so this rarely returns
    except BaseException as stop:
        _end_at_once_on_signals()  # from here to the process's end (atexit hooks) too
        if not _by_ctrl_c(stop):
            raise
        signum = _signal_of(stop)
        _say(signum)
        by_typer = isinstance(stop, SystemExit) and signum == signal.SIGINT
        code = stop.code if isinstance(stop, SystemExit) and by_typer else 128 + signum
    _end_at_once_on_signals()
    sys.exit(code)


def _end_at_once_on_signals() -> None:
    for signum in _STOPPED:
        signal.signal(signum, _end_at_once)


def _end_at_once(signum: int, frame: FrameType | None) -> None:
    """Exit with 128 + the signal's number (the shell's convention, and ExitCode's), having
    said why: a KeyboardInterrupt raised in the middle of an import or of Python's shutdown
    would print a traceback (or be swallowed by a bare ``except``)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # interrupted inside a write to it, or closed
            stream.flush()
    _say(signum)
    os._exit(128 + signum)


def _say(signum: int) -> None:
    # os.write, not print: a signal handler may run while the main thread is inside a
    # write to sys.stderr, which would refuse a reentrant one.
    with contextlib.suppress(OSError):
        os.write(2, f"perfbench: {_STOPPED[signal.Signals(signum)]}\n".encode())


def _signal_of(exc: BaseException) -> int:
    """The signal that stopped the command: a SIGTERM that cut a stopping run short
    (``api.Hurried``) exits 143, as the first SIGTERM's clean stop does; else SIGINT."""
    found: BaseException | None = exc
    for _ in range(8):  # typer's exit keeps the interrupt in its context
        if found is None:
            break
        signum = getattr(found, "signum", None)
        if isinstance(found, KeyboardInterrupt) and isinstance(signum, int):
            return signum
        found = found.__cause__ or found.__context__
    return signal.SIGINT


def _by_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling, a KeyboardInterrupt: typer turns one
    in a command into a silent exit 130 (it stays in the exit's context)."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, KeyboardInterrupt):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


# --help lists the commands in the order a user meets them, not the modules' import order.
_ORDER = ("run", "sweep", "list", "show", "compare", "ab", "plan", "history", "report", "export",
          "calibrate", "verify", "proxy")  # fmt: skip


# Commands whose start-up someone waits on, imported alone: a script reads `perfbench proxy`'s
# URL from its first line, and every command's modules (the engine, compare, pandas) were
# about half of the time before it (3.4 s against 6.4 s at load average 13 on 2 cores).
_ALONE = {"proxy": "perfbench.cli.proxy"}


def _for(first: list[str]) -> typer.Typer:
    """The app for a command line whose first word is ``first``: with only that command
    when it is one of ``_ALONE`` (its --help is its own), else every command."""
    module = _ALONE.get(first[0]) if first else None
    if module is None:
        return _wired()
    import importlib

    importlib.import_module(module)  # registers the command
    from perfbench.cli.app import app

    _reflow_help(app)
    return app


@cache
def _wired() -> typer.Typer:
    """The app with every command registered, in help order, with help text re-flowed."""
    from perfbench.cli import (
        ab,
        calibrate,
        cases,
        compare,
        history,
        mock,
        plan,
        proxy,
        results,
        run,
        runs,
        slo,
        sweep,
        verify,
    )  # fmt: skip
    from perfbench.cli.app import app, cases_app, mock_app, slo_app

    # imported for the commands they register
    del (
        ab,
        calibrate,
        cases,
        compare,
        history,
        mock,
        plan,
        proxy,
        results,
        run,
        runs,
        slo,
        sweep,
        verify,
    )
    app.registered_commands.sort(key=lambda c: _ORDER.index(_name(c)))
    _reflow_help(app, cases_app, mock_app, slo_app)
    return app


def _name(command: typer.models.CommandInfo) -> str:
    return command.name or (command.callback.__name__ if command.callback else "")


def _reflow_help(*apps: typer.Typer) -> None:
    for each in apps:
        for command in each.registered_commands:
            if command.help is None and command.callback is not None:
                command.help = _reflow(command.callback.__doc__ or "")


def _reflow(doc: str) -> str:
    """A docstring as help: each paragraph one line, for rich to wrap to the terminal. typer
    keeps a docstring's line breaks after its first paragraph, so a paragraph written for an
    editor's width came out ragged in a narrower terminal."""
    import inspect  # not at the top: this module imports only what main() needs first

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def __getattr__(name: str) -> Any:
    if name == "app":
        return _wired()
    if name == "ExitCode":
        from perfbench.cli.app import ExitCode

        return ExitCode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(ModuleType):
    """This package, whose ``app`` is the command app (built by ``__getattr__`` on first use),
    not the submodule of that name the import system would bind here once imported."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "app" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
