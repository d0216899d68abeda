"""ShareGPT conversations from a local file (never downloaded at run time).

The format is a JSON list of ``{"id": …, "conversations": [{"from": "human", "value": …},
{"from": "gpt", "value": …}, …]}`` (a ``.jsonl`` file holding one conversation a line is
read too). As vLLM's benchmark does, a conversation's first human turn is the prompt, and
the reply that follows it, counted in tokens of ``tokenizer``, is the output length asked
(``output`` asks one length of every prompt instead). Conversations with no human turn
answered by a model, or with an empty one, are skipped, as vLLM skips them; an entry that
is not shaped as above is an error naming where it is (its index, and its line in JSONL).

With ``turns: all`` a conversation is a multi-turn case instead: its human turns with text,
in order (the first ``max_turns``), each sent after the model's real answer to the one
before; the recorded replies are not sent, only counted for the output length asked."""

from __future__ import annotations

import codecs
import functools
import itertools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from perfbench.sources import ID_PREFIX, Prompt, SourceError
from perfbench.sources.files import filled_lines, read_text
from perfbench.sources.selection import Selection, pick
from perfbench.sources.tokenizer import Tokenizer

HUMAN = ("human", "user")
MODEL = ("gpt", "chatgpt", "assistant", "bard", "bing", "model")

# What a conversation sends (its human turns) and the replies recorded after them.
Talk = tuple[list[str], list[str]]


class ShareGpt(Selection):
    """``source: {sharegpt: {path: …}}``.

    With ``turns: all`` the length filters keep whole conversations: ``min_input`` and
    ``max_input`` bound the human turns sent, together (the model's answers add to the
    context on top, as the server makes them), and ``min_output`` and ``max_output`` bound the
    output length asked of each turn, so in both modes they bound what the case asks."""

    min_output: int | None = Field(default=None, ge=1)  # the reply's length, in tokens
    max_output: int | None = Field(default=None, ge=1)
    id_prefix: str = Field(default="sg", pattern=ID_PREFIX)
    turns: Literal["first", "all"] = "first"  # first: the first exchange (vLLM's benchmark)
    max_turns: int | None = Field(default=None, ge=1)  # turns: all only; None: every turn

    @model_validator(mode="after")
    def _output_ordered(self) -> ShareGpt:
        if self.min_output and self.max_output and self.min_output > self.max_output:
            raise ValueError(
                f"min_output ({self.min_output}) is above max_output ({self.max_output})"
            )
        return self

    @model_validator(mode="after")
    def _capped_only_with_all(self) -> ShareGpt:
        if self.max_turns is not None and self.turns != "all":
            # Ignoring it would run another workload than the one written.
            raise ValueError("max_turns needs turns: all (turns: first sends one turn)")
        return self

    def output_fits(self, tokens: int) -> bool:
        return (self.min_output or 1) <= tokens <= (self.max_output or tokens)


def prompts(spec: ShareGpt, base: Path) -> list[Prompt]:
    return list(stream(spec, base))


def stream(spec: ShareGpt, base: Path) -> Iterator[Prompt]:
    """The conversations' prompts taken by ``spec``, the file read a conversation at a time
    (twice with ``n``: to count, then to take)."""
    path = spec.file(base)
    tokenizer = Tokenizer(spec.tokenizer)

    def make(i: int, line: int | None, entry: Any) -> Prompt | None:
        talk = _talk(spec, entry, path, line, i)
        if talk is None:
            return None
        sent, replies = talk
        if spec.filters_input and not spec.input_fits(sum(map(tokenizer.count, sent))):
            return None
        replied = _per_turn([tokenizer.count(r) for r in replies])
        if not spec.output_fits(replied):  # an empty reply asks for nothing: skipped
            return None
        name = str(entry.get("id") or "")
        output = spec.output or replied
        turns = tuple(sent) if spec.turns == "all" else None
        return Prompt(sent[0], output_tokens=output, name=name, origin=(path, line), turns=turns)

    total, entries = _entries(path, counted=spec.n is not None)
    made = (functools.partial(make, i, *entry) for i, entry in enumerate(entries))
    return pick(total, made, n=spec.n, seed=spec.seed)


def _talk(spec: ShareGpt, entry: Any, path: Path, line: int | None, i: int) -> Talk | None:
    if spec.turns == "all":
        return _conversation(entry, path, line, i, spec.max_turns)
    pair = _first_exchange(entry, path, line, i)
    return None if pair is None else ([pair[0]], [pair[1]])


def _per_turn(replied: list[int]) -> int:
    """The output length asked of each turn: the mean of the recorded replies (rounded half
    up, in integers so every platform agrees). A case asks one length of all its model calls,
    and the mean keeps the conversation's total output near what was recorded; one reply
    (``first``) is its own length."""
    return (sum(replied) + len(replied) // 2) // len(replied)


def _entries(path: Path, *, counted: bool) -> tuple[int, Iterator[tuple[int | None, Any]]]:
    """How many conversations there are (0 unless ``counted``), and each with its line
    (JSONL only: a JSON list's parser says where a syntax error is, but not where each value
    of a good file sits). Either file is read an entry at a time, twice when counted."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        total = sum(1 for _ in filled_lines(path)) if counted else 0
        return total, ((n, _json(line, path, n)) for n, line in filled_lines(path))
    total = sum(1 for _ in _listed(path)) if counted else 0
    return total, ((None, entry) for entry in _listed(path))


def _listed(path: Path) -> Iterator[Any]:
    """The entries of a JSON list, parsed one at a time (ijson): ShareGPT's own file is
    ~670 MB of JSON, several GB parsed whole."""
    import ijson  # only for a JSON list

    with path.open("rb") as file:
        if file.read(len(codecs.BOM_UTF8)) != codecs.BOM_UTF8:
            file.seek(0)
        events = ijson.parse(file, use_float=True)
        try:
            first = next(events, None)
            if first is None or first[1] != "start_array":
                raise SourceError((), "expected a JSON list of conversations", file=path, line=1)
            yield from ijson.items(events, "item")
        except ijson.JSONError as exc:
            raise _located(path, exc) from exc


def _located(path: Path, exc: Exception) -> SourceError:
    """A JSON list's syntax error, with its line: ijson's errors give none, so the file is
    parsed whole to find it (only when it is broken); its own message if that parses."""
    _json(read_text(path), path, None)  # raises the located error
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return SourceError((), f"is not JSON: {first}", file=path)


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


def _conversation(entry: Any, path: Path, line: int | None, i: int, cap: int | None) -> Talk | None:
    """The human turns with text, in order (the first ``cap``), and the model turns right
    after them, or None when a model answered none of them (skipped, as ``first`` skips
    it). Every turn is checked, those past ``cap`` too, so ``cap`` hides no malformed file.
    A human turn nobody answered is sent too (the model answers it for real); an empty one
    is left out, as ``first`` passes over it, since a case's turn needs text."""
    turns = _turns(entry, path, line, i)
    for k, turn in enumerate(turns):
        _check_turn(turn, path, line, f"[{i}].conversations[{k}]")
    sent: list[str] = []
    replies: list[str] = []
    for k, turn in enumerate(turns):
        if len(sent) == cap:
            break
        if turn["from"] not in HUMAN or not turn["value"].strip():
            continue
        sent.append(turn["value"])
        if k + 1 < len(turns) and turns[k + 1]["from"] in MODEL:
            replies.append(turns[k + 1]["value"])
    return (sent, replies) if replies else None


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
