"""Prompts shaped by a trace's lines (`run --trace FILE` with no cases): each arrival's
``input_length`` in tokens, its ``output_length`` asked, and, where the line has
``hash_ids``, its prompt made of those blocks, so that requests sharing their first block
ids share that prefix exactly, as in the traffic the trace recorded (Mooncake's traces and
AIPerf's replay of them work so).

A block is ``BLOCK_TOKENS`` tokens of seeded filler ending in a line break (a break is a
token boundary whatever follows, so a block's tokens are the same wherever it sits); one
block id is always the same text. A prompt is its blocks but the last, then filler that
makes it exactly ``input_length`` tokens: the last block of a Mooncake trace is a partial
one, and a prompt's tail is its own. Lines without ``hash_ids`` get filler of their length.

Deterministic: a block's text depends on its id, a prompt's tail on its line number."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from perfbench.load.trace import Arrival
from perfbench.sources import Prompt, SourceError
from perfbench.sources.synthetic import fit
from perfbench.sources.tokenizer import DEFAULT, Tokenizer

BLOCK_TOKENS = 512  # Mooncake's block size, and AIPerf's default for its traces
LANGUAGE = "en"
ID_PREFIX = "trace"


def shaped(arrivals: Sequence[Arrival]) -> bool:
    """Whether the trace says how long each request is (every line, or none, must)."""
    return any(a.input_length is not None for a in arrivals)


def prompts(arrivals: Sequence[Arrival], path: Path, tokenizer_name: str = DEFAULT) -> list[Prompt]:
    """One prompt per arrival of the trace in ``path``, in the arrivals' order."""
    return list(stream(arrivals, path, tokenizer_name))


def stream(
    arrivals: Iterable[Arrival], path: Path, tokenizer_name: str = DEFAULT
) -> Iterator[Prompt]:
    """``prompts`` one at a time, each made when asked for; what is kept between them is
    the text of each block id met (a trace's blocks are shared: that is their point)."""
    tokenizer = Tokenizer(tokenizer_name)
    blocks: dict[int, str] = {}
    for a in arrivals:
        if a.input_length is None:
            raise SourceError(
                ("input_length",),
                "is missing: a trace that shapes its requests gives every line one",
                file=path,
                line=a.line,
            )
        head = _prefix(a, blocks, tokenizer)
        rng = random.Random(f"trace:{a.line}")
        text = fit(LANGUAGE, rng, tokenizer, a.input_length, head=head)
        yield Prompt(text, LANGUAGE, output_tokens=a.output_length, origin=(path, a.line))


def _prefix(a: Arrival, blocks: dict[int, str], tokenizer: Tokenizer) -> str:
    """The text of the arrival's whole blocks (all its ids but the last), as far as its
    length holds them; a block's text is made once and reused."""
    assert a.input_length is not None
    whole = min(max(0, len(a.hash_ids) - 1), (a.input_length - 1) // BLOCK_TOKENS)
    parts = []
    for block in a.hash_ids[:whole]:
        text = blocks.get(block)
        if text is None:
            rng = random.Random(f"block:{block}")
            text = blocks[block] = fit(LANGUAGE, rng, tokenizer, BLOCK_TOKENS, tail="\n")
        parts.append(text)
    return "".join(parts)
