"""Which prompts of a data file a workload takes: length filters, ``n``, and a seeded sample.

With ``n``, the taken are the first ``n`` that pass the filters in an order of the entries
shuffled by the seed (as vLLM's benchmark samples ShareGPT), in file order, which is the
order they run in. The file is read once in its order, and an entry is counted in tokens
only while it could still be taken: for 100 of 90,000 conversations, ~800 are counted."""

from __future__ import annotations

import heapq
import random
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfbench.sources import MAX_COUNT, Prompt, SourceError
from perfbench.sources.tokenizer import DEFAULT, Name


class Selection(BaseModel):
    """The settings every file source has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)  # relative to the case file
    n: int | None = Field(default=None, ge=1, le=MAX_COUNT)  # None: every entry that passes
    seed: int = 0
    min_input: int | None = Field(default=None, ge=1)  # prompt length, in tokens
    max_input: int | None = Field(default=None, ge=1)
    output: int | None = Field(default=None, ge=1)  # output length asked of every prompt
    tokenizer: Name = DEFAULT

    @model_validator(mode="after")
    def _ordered(self) -> Selection:
        if self.min_input and self.max_input and self.min_input > self.max_input:
            raise ValueError(f"min_input ({self.min_input}) is above max_input ({self.max_input})")
        return self

    def file(self, base: Path) -> Path:
        """The data file, found from the folder of the case file that names it."""
        path = base / Path(self.path).expanduser()
        if not path.is_file():
            raise SourceError(("path",), f"no such file: {path}")
        return path

    def input_fits(self, tokens: int) -> bool:
        return (self.min_input or 0) <= tokens <= (self.max_input or tokens)

    @property
    def filters_input(self) -> bool:
        return self.min_input is not None or self.max_input is not None


def pick(
    total: int, entries: Iterable[Callable[[], Prompt | None]], *, n: int | None, seed: int
) -> Iterator[Prompt]:
    """The prompts taken from ``total`` entries read in file order, each given as what makes
    its prompt (None: filtered out), so that a file is read once, an entry at a time.

    Without ``n`` each prompt is given as it is read. With ``n`` the taken are the first
    ``n`` that pass in the order ``random.Random(seed).shuffle`` gives the entries, found in
    file order: the n passing entries of lowest rank in that order, kept as the file is read;
    an entry is made (counted in tokens) only while its rank could still be among them,
    ~n·(1 + ln(total/n)) entries, and the shuffle is held as two arrays of integers."""
    if n is None:
        yield from (p for p in (make() for make in entries) if p is not None)
        return
    rank = _ranks(total, seed)
    kept: list[tuple[int, int, Prompt]] = []  # (-rank, index, prompt): a max-heap by rank
    for i, make in enumerate(entries):
        if len(kept) == n and rank[i] > -kept[0][0]:
            continue  # a later rank than every one kept: never taken
        prompt = make()
        if prompt is not None:
            heapq.heappush(kept, (-rank[i], i, prompt))
            if len(kept) > n:
                heapq.heappop(kept)
    if len(kept) < n:  # every entry was made: these are all that pass
        passing = f"{len(kept)} of its {total} entries pass the filters"
        raise SourceError(("n",), f"asks for {n} prompts, but the file has fewer: {passing}")
    yield from (p for _, _, p in sorted(kept, key=lambda k: k[1]))


def _ranks(total: int, seed: int) -> array[int]:
    """Each entry's place in the order ``random.Random(seed).shuffle`` gives ``range(total)``
    (the same shuffle of an array as of a list: it swaps by index)."""
    order = array("q", range(total))
    random.Random(seed).shuffle(order)
    rank = array("q", bytes(8 * total))
    for k, i in enumerate(order):
        rank[i] = k
    return rank
