"""Warnings on the short screen: the first few in full and one line for the rest, so a run on a
busy machine (four warnings, three lines each at 80 columns) still fits one screen; CI's run
printed 37 lines where 35 fit."""

from __future__ import annotations

from rich.console import Console

from perfbench.cli.output import SCREEN_WARNINGS, print_warnings


def _printed(notes: list[str], details: bool) -> list[str]:
    console = Console(width=80, record=True, color_system=None)
    print_warnings(notes, console, details)
    return console.export_text().splitlines()


NOTES = [f"Warning number {i}: something to fix, and how." for i in range(5)]


def test_the_short_screen_shows_the_first_warnings_and_counts_the_rest() -> None:
    lines = _printed(NOTES, details=False)
    assert lines[:SCREEN_WARNINGS] == [f"warning: {n}" for n in NOTES[:SCREEN_WARNINGS]]
    hidden = len(NOTES) - SCREEN_WARNINGS
    assert lines[SCREEN_WARNINGS:] == [
        f"warning: {hidden} more warning(s): perfbench show RUN_DIR --details prints them all"
    ]


def test_one_warning_over_the_limit_is_counted_too() -> None:
    # A warning is two or three lines at 80 columns, its count one: with the `*` line of thin
    # percentiles and a long run directory, three warnings in full made 36 lines under load.
    notes = NOTES[: SCREEN_WARNINGS + 1]
    assert _printed(notes, details=False) == [
        *(f"warning: {n}" for n in notes[:SCREEN_WARNINGS]),
        "warning: 1 more warning(s): perfbench show RUN_DIR --details prints them all",
    ]


def test_details_prints_every_warning() -> None:
    assert _printed(NOTES, details=True) == [f"warning: {n}" for n in NOTES]
