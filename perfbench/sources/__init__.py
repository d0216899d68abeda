"""Workload sources: prompts that are not written by hand as cases, made deterministic for a
seed and turned into ordinary cases by ``perfbench.suite``, so every runner, load shape,
statistic, comparison and report works on them unchanged, and the suite digest covers them.

- ``synthetic``: prompts of a given length in tokens of a named tokenizer, in a language,
  with an asked output length and an optional shared prefix;
- ``files``: prompt files (JSONL, CSV, plain text);
- ``sharegpt``: ShareGPT conversations from a local file (the first human turn is the
  prompt; the model's reply, counted in tokens, is the output length asked), or, with
  ``turns: all``, every human turn, as a multi-turn case.

A case file names one in a ``source:`` block (``block``); docs/workloads.md has the syntax.
This package sits below ``suite``: a source gives ``Prompt`` objects, and the suite makes them
cases (with the file's ``defaults:``), so no source module imports the suite."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

Loc = tuple[str | int, ...]

MAX_COUNT = 1_000_000  # prompts one source may make
# A source's id prefix: leaves room for "-0001" within a case id's 64 characters.
ID_PREFIX = r"^[A-Za-z0-9_.\-]{1,48}$"


@dataclass(frozen=True)
class Prompt:
    """One generated or read prompt, before it becomes a case."""

    text: str
    language: str | None = None  # None: detected from the text, as for a hand-written case
    output_tokens: int | None = None  # the exact output length asked
    max_tokens: int | None = None  # a cap only (a prompt file's ``max_tokens`` column)
    name: str = ""  # where it came from, for people: a conversation's id
    origin: tuple[Path, int | None] | None = None  # the data file and line it was read from
    # A conversation's user turns, in order, sent as a multi-turn case instead of ``text``
    # (which is the first of them); None: a single prompt.
    turns: tuple[str, ...] | None = None


class SourceError(Exception):
    """A problem with a source. Without ``file`` it is in the source's settings, at ``field``
    (located by the caller: a case file's ``source:`` block, or the ``--synthetic`` flag);
    with ``file`` it is in that data file, at ``line`` when the format has lines."""

    def __init__(
        self, field: Loc, message: str, *, file: Path | None = None, line: int | None = None
    ) -> None:
        self.field = field
        self.message = message
        self.file = file
        self.line = line
        super().__init__(message)


def case_ids(prefix: str, n: int) -> list[str]:
    """``syn-0001`` …: numbered from 1, as wide as ``n`` needs (at least four digits), so
    ids sort in the order the prompts were made."""
    width = max(4, len(str(n)))
    return [f"{prefix}-{i:0{width}d}" for i in range(1, n + 1)]
