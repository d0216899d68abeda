"""ShareGPT conversations from a local file (never downloaded at run time).

The format is a JSON list of ``{"id": …, "conversations": [{"from": "human", "value": …},
{"from": "gpt", "value": …}, …]}`` (a ``.jsonl`` file holding one conversation a line is
read too). As vLLM's benchmark does, a conversation's first human turn is the prompt, and
the reply that follows it, counted in tokens of ``tokenizer``, is the output length asked
(``output`` asks one length of every prompt instead). Conversations with no human turn
answered by a model, or with an empty one, are skipped, as vLLM skips them; an entry that
is not shaped as above is an error naming where it is (its index, and its line in JSONL)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from perfbench.sources import ID_PREFIX, Prompt, SourceError
from perfbench.sources.files import read_text
from perfbench.sources.selection import Selection, choose
from perfbench.sources.tokenizer import Tokenizer

HUMAN = ("human", "user")
MODEL = ("gpt", "chatgpt", "assistant", "bard", "bing", "model")


class ShareGpt(Selection):
    """``source: {sharegpt: {path: …}}``."""

    min_output: int | None = Field(default=None, ge=1)  # the reply's length, in tokens
    max_output: int | None = Field(default=None, ge=1)
    id_prefix: str = Field(default="sg", pattern=ID_PREFIX)

    @model_validator(mode="after")
    def _output_ordered(self) -> ShareGpt:
        if self.min_output and self.max_output and self.min_output > self.max_output:
            raise ValueError(
                f"min_output ({self.min_output}) is above max_output ({self.max_output})"
            )
        return self

    def output_fits(self, tokens: int) -> bool:
        return (self.min_output or 1) <= tokens <= (self.max_output or tokens)


def prompts(spec: ShareGpt, base: Path) -> list[Prompt]:
    path = spec.file(base)
    entries = _entries(path)
    tokenizer = Tokenizer(spec.tokenizer)

    def make(i: int) -> Prompt | None:
        line, entry = entries[i]
        pair = _first_exchange(entry, path, line, i)
        if pair is None:
            return None
        prompt, reply = pair
        if spec.filters_input and not spec.input_fits(tokenizer.count(prompt)):
            return None
        replied = tokenizer.count(reply)
        if not spec.output_fits(replied):  # an empty reply asks for nothing: skipped
            return None
        name = str(entry.get("id") or "")
        output = spec.output or replied
        return Prompt(prompt, output_tokens=output, name=name, origin=(path, line))

    return choose(len(entries), make, n=spec.n, seed=spec.seed)


def _entries(path: Path) -> list[tuple[int | None, Any]]:
    """Each conversation with its line (JSONL only: the standard library's JSON parser says
    where a syntax error is, but not where each value of a good file sits)."""
    text = read_text(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        lines = enumerate(text.split("\n"), start=1)
        return [(n, _json(line, path, n)) for n, line in lines if line.strip()]
    data = _json(text, path, None)
    if not isinstance(data, list):
        raise SourceError((), "expected a JSON list of conversations", file=path, line=1)
    return [(None, entry) for entry in data]


def _json(text: str, path: Path, line: int | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise SourceError((), f"is not JSON: {exc.msg}", file=path, line=where) from exc


def _first_exchange(entry: Any, path: Path, line: int | None, i: int) -> tuple[str, str] | None:
    """The first human turn with text and the model turn right after it, or None."""
    turns = _turns(entry, path, line, i)
    for j, (turn, following) in enumerate(itertools.pairwise(turns)):
        for k, t in ((j, turn), (j + 1, following)):
            _check_turn(t, path, line, f"[{i}].conversations[{k}]")
        if turn["from"] in HUMAN and turn["value"].strip() and following["from"] in MODEL:
            return turn["value"], following["value"]
    return None


def _turns(entry: Any, path: Path, line: int | None, i: int) -> list[Any]:
    if not isinstance(entry, Mapping):
        raise SourceError(
            (),
            f"[{i}]: expected a conversation, an object with 'conversations'",
            file=path,
            line=line,
        )
    turns = entry.get("conversations", [])
    if not isinstance(turns, list):
        raise SourceError(
            (), f"[{i}].conversations: expected a list of turns", file=path, line=line
        )
    return turns


def _check_turn(turn: Any, path: Path, line: int | None, where: str) -> None:
    if not (
        isinstance(turn, Mapping)
        and isinstance(turn.get("from"), str)
        and isinstance(turn.get("value"), str)
    ):
        msg = f"{where}: expected a turn, {{from: human|gpt, value: text}}"
        raise SourceError((), msg, file=path, line=line)
