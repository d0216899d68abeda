"""Prompt files: JSONL, CSV (with a header) or plain text, one prompt per line or row.

A JSONL line is an object or a string. An object's (and a CSV row's) prompt is its
``prompt``, ``text`` or ``input`` field (the first present); optional fields are
``output_tokens`` (the exact output length asked), ``max_tokens`` (a cap only), ``language``
and ``id`` (kept as the case's name). Other fields are left alone: data files carry more
columns than a workload needs. A plain text file's every non-empty line is a prompt.

Every problem names the file and the line (a CSV row's last line)."""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from perfbench.sources import ID_PREFIX, Prompt, SourceError
from perfbench.sources.selection import Selection, pick
from perfbench.sources.tokenizer import Tokenizer

Format = Literal["jsonl", "csv", "txt"]
_SUFFIXES: dict[str, Format] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".txt": "txt"}
TEXT_FIELDS = ("prompt", "text", "input")


class PromptFile(Selection):
    """``source: {prompts: {path: …}}``."""

    format: Format | None = None  # None: from the file's suffix
    id_prefix: str = Field(default="prompt", pattern=ID_PREFIX)


def prompts(spec: PromptFile, base: Path) -> list[Prompt]:
    return list(stream(spec, base))


def stream(spec: PromptFile, base: Path) -> Iterator[Prompt]:
    """The file's prompts taken by ``spec``, read a line (a CSV row) at a time: twice with
    ``n`` (to count the rows, then to take them), never held whole."""
    path = spec.file(base)
    kind = spec.format or _format_of(path)
    tokenizer = Tokenizer(spec.tokenizer)

    def fitted(prompt: Prompt) -> Prompt | None:
        if spec.filters_input and not spec.input_fits(tokenizer.count(prompt.text)):
            return None
        if spec.output is not None:
            return replace(prompt, output_tokens=spec.output)
        return prompt

    total = _rows_in(path, kind) if spec.n is not None else 0
    made = (functools.partial(fitted, row) for row in _rows(path, kind))
    return pick(total, made, n=spec.n, seed=spec.seed)


def _format_of(path: Path) -> Format:
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(_SUFFIXES)
        msg = f"cannot tell the format of {path.name} from its suffix ({known} are known)"
        raise SourceError(("format",), f"{msg}; give format: jsonl, csv or txt")
    return kind


def read_text(path: Path) -> str:
    """The file as text: UTF-8, a byte-order mark allowed (spreadsheets write one)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError((), "is not UTF-8 text; save it as UTF-8", file=path, line=line) from exc


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines with their numbers, read one at a time, each with its line feed:
    UTF-8, a byte-order mark allowed. Lines end at line feeds only: str.splitlines would
    also end them at U+2028 and the like, which JSON strings may hold, and count lines as
    no editor does."""
    with path.open("rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                msg = "is not UTF-8 text; save it as UTF-8"
                raise SourceError((), msg, file=path, line=number) from exc


def _rows(path: Path, kind: Format) -> Iterator[Prompt]:
    if kind == "csv":
        for ends, row in _csv_rows(path):
            yield row_prompt(row, path, ends)
        return
    for number, line in filled_lines(path):
        if kind == "txt":
            yield Prompt(line, origin=(path, number))
        else:
            yield row_prompt(_json_line(path, number, line), path, number)


def _rows_in(path: Path, kind: Format) -> int:
    """The rows ``_rows`` gives, counted without reading what they hold."""
    return sum(1 for _ in (_csv_rows(path) if kind == "csv" else filled_lines(path)))


def filled_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines with text, without their line feeds, with their numbers."""
    for number, line in read_lines(path):
        line = line.removesuffix("\n").removesuffix("\r")
        if line.strip():
            yield number, line


def _json_line(path: Path, number: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise SourceError((), f"is not JSON: {exc.msg}", file=path, line=number) from exc


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each row with the line it ends on."""
    reader = csv.DictReader(line for _, line in read_lines(path))
    columns = reader.fieldnames or []
    if not any(f in columns for f in TEXT_FIELDS):
        wanted = " or ".join(TEXT_FIELDS)
        raise SourceError((), f"the header names no {wanted} column", file=path, line=1)
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise SourceError((), f"is not CSV: {exc}", file=path, line=reader.line_num) from exc


def row_prompt(row: Any, path: Path, line: int | None) -> Prompt:
    """One JSONL object (or string) or CSV row as a prompt."""
    if isinstance(row, str):
        row = {"prompt": row}
    if not isinstance(row, Mapping):
        raise SourceError(
            (), "expected an object with a prompt field, or a string", file=path, line=line
        )
    name = next((f for f in TEXT_FIELDS if f in row), None)
    if name is None:
        wanted = ", ".join(repr(f) for f in TEXT_FIELDS)
        raise SourceError((), f"has none of the fields {wanted}", file=path, line=line)
    text = row[name]
    if not isinstance(text, str) or not text.strip():
        raise SourceError((), f"{name} must be non-empty text", file=path, line=line)
    return Prompt(
        text,
        language=_optional_text(row, "language", path, line),
        output_tokens=_count(row, "output_tokens", path, line),
        max_tokens=_count(row, "max_tokens", path, line),
        name=str(row.get("id") or ""),
        origin=(path, line),
    )


def _count(row: Mapping[str, Any], key: str, path: Path, line: int | None) -> int | None:
    value = row.get(key)
    if value is None or value == "":  # an empty CSV cell is a value not given
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # a CSV cell is text
    if type(value) is not int or value < 1:
        raise SourceError(
            (), f"{key} must be a whole number above 0 (got {value!r})", file=path, line=line
        )
    return value


def _optional_text(row: Mapping[str, Any], key: str, path: Path, line: int | None) -> str | None:
    value = row.get(key)
    if value is None or isinstance(value, str):
        return value or None
    raise SourceError((), f"{key} must be text (got {value!r})", file=path, line=line)
