"""Which prompts of a data file a workload takes: length filters, ``n``, and a seeded sample.

With ``n``, the file's entries are visited in an order shuffled by the seed and the first
``n`` that pass the filters are taken (as vLLM's benchmark samples ShareGPT), so only those
visited are counted in tokens: a file of 90,000 conversations costs what ``n`` of them cost.
The prompts taken are then put back in file order, which is the order they run in."""

from __future__ import annotations

import random
from collections.abc import Callable
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


def choose(
    total: int, make: Callable[[int], Prompt | None], *, n: int | None, seed: int
) -> list[Prompt]:
    """The prompts taken from ``total`` entries; ``make(i)`` is entry ``i`` as a prompt, or
    None when it does not pass the filters."""
    if n is None:
        return [p for p in map(make, range(total)) if p is not None]
    order = list(range(total))
    random.Random(seed).shuffle(order)
    taken: list[tuple[int, Prompt]] = []
    for i in order:
        prompt = make(i)
        if prompt is not None:
            taken.append((i, prompt))
            if len(taken) == n:
                return [p for _, p in sorted(taken, key=lambda t: t[0])]
    passing = f"{len(taken)} of its {total} entries pass the filters"
    raise SourceError(("n",), f"asks for {n} prompts, but the file has fewer: {passing}")
