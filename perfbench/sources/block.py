"""The ``source:`` block of a case file: which source makes the file's cases.

    source:
      synthetic: {input: 512, output: 128, n: 200, seed: 1}
    source:
      sharegpt: {path: data/sg.json, n: 100, seed: 1, max_input: 1024}
    source:
      prompts: {path: prompts.jsonl}

One source a block; a file may hold ``cases:`` beside it. Paths are relative to the case
file."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from perfbench.sources import Prompt, case_ids, files, sharegpt, synthetic
from perfbench.sources.files import PromptFile
from perfbench.sources.sharegpt import ShareGpt
from perfbench.sources.synthetic import Spec as Synthetic

KINDS = ("synthetic", "prompts", "sharegpt")


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The annotations name the classes, not module.Class: a field's name would shadow its
    # module where pydantic reads the annotation.
    synthetic: Synthetic | None = None
    prompts: PromptFile | None = None
    sharegpt: ShareGpt | None = None

    @model_validator(mode="after")
    def _one(self) -> Source:
        given = [k for k in KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            also = f" (got {', '.join(given)})" if given else ""
            raise ValueError(f"give exactly one of {', '.join(KINDS)}{also}")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    def make(self, base: Path) -> list[tuple[str, Prompt]]:
        """The prompts with their case ids; ``base`` is the case file's folder."""
        made: list[Prompt]
        if self.synthetic is not None:
            made, prefix = synthetic.prompts(self.synthetic), self.synthetic.id_prefix
        elif self.prompts is not None:
            made, prefix = files.prompts(self.prompts, base), self.prompts.id_prefix
        else:
            assert self.sharegpt is not None
            made, prefix = sharegpt.prompts(self.sharegpt, base), self.sharegpt.id_prefix
        return list(zip(case_ids(prefix, len(made)), made, strict=True))
