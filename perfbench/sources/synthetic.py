"""Synthetic prompts: a given length in tokens of a named tokenizer, in a language, with an
asked output length and an optional shared prefix (for prefix-cache scenarios).

The spec is written as ``key=value`` pairs on the command line (``--synthetic
"input=512,output=128,n=200"``) or as a mapping in a case file's ``source: {synthetic: …}``;
the keys are ``Spec``'s fields (docs/workloads.md lists them).

A prompt is seeded filler text in the language (``words``), encoded, cut to the length asked
and decoded again. Cutting token ids can split a character or make the cut text re-encode
differently, so the cut is moved until the text's own count is the length asked; every
prompt's count is checked against it (±1 token at most; exact in practice).

Each prompt draws from its own generator, seeded by the spec's seed and the prompt's number:
prompt 7 is the same whatever ``n`` is, and the same seed gives the same prompts on any
machine (``random.Random`` seeded with text is stable across processes and versions)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from perfbench import yamlfile
from perfbench.errors import Problem, SuiteError
from perfbench.sources import ID_PREFIX, MAX_COUNT, Prompt, SourceError
from perfbench.sources.lengths import Dist, Lengths
from perfbench.sources.tokenizer import DEFAULT, Name, Tokenizer
from perfbench.sources.words import LANGUAGES, POOLS, joined, sentence

# The longest prompt made: a million tokens is the longest context any model takes, and
# about four seconds of tokenizing per prompt.
MAX_INPUT = 1_000_000
# How often the cut is moved before the closest count seen is taken.
_FIT_TRIES = 12
# A sentence's usual length in tokens (o200k_base; cl100k_base's are longer), a little
# under the mean: more sentences than needed cost a few µs each, an encode more ~20 µs.
_PER_SENTENCE = {"en": 11, "es": 12, "zh": 15, "ja": 20}
FLAG = "--synthetic"


class Spec(BaseModel):
    """A synthetic workload. Lengths are in tokens of ``tokenizer``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: int = Field(ge=1, le=MAX_INPUT)  # the prompt's length (its mean, if drawn)
    output: int = Field(ge=1, le=MAX_INPUT)  # the output length asked (its mean, if drawn)
    n: int = Field(default=100, ge=1, le=MAX_COUNT)
    dist: Dist = "constant"  # how input lengths (and output, with output_stddev) are drawn
    stddev: float = Field(default=0.0, ge=0)  # of input lengths
    min: int | None = Field(default=None, ge=1, le=MAX_INPUT)  # input lengths clamped to
    max: int | None = Field(default=None, ge=1, le=MAX_INPUT)
    output_stddev: float = Field(default=0.0, ge=0)
    tokenizer: Name = DEFAULT
    language: str = "en"
    prefix: int = Field(default=0, ge=0, le=MAX_INPUT)  # tokens shared at the start
    prefix_share: float | None = Field(default=None, ge=0, le=1)  # of prompts (default 1)
    seed: int = 0
    id_prefix: str = Field(default="syn", pattern=ID_PREFIX)

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        if value not in LANGUAGES:
            raise ValueError(f"must be one of {', '.join(LANGUAGES)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Spec:
        wrong = self._spread_problem() or self._bounds_problem() or self._prefix_problem()
        if wrong:
            raise ValueError(wrong)
        return self

    def _spread_problem(self) -> str | None:
        if self.dist == "constant" and (self.stddev or self.output_stddev):
            return "stddev and output_stddev need dist=uniform, normal or lognormal"
        if self.dist in ("normal", "lognormal") and not self.stddev:
            return f"dist={self.dist} needs stddev (of input lengths, in tokens) above 0"
        if self.dist == "uniform" and not self.stddev and None in (self.min, self.max):
            return "dist=uniform needs stddev, or both min and max (the range)"
        return None

    def _bounds_problem(self) -> str | None:
        low, high = self.min or 1, self.max or MAX_INPUT
        if low > high:
            return f"min ({low}) must not be above max ({high})"
        if not low <= self.input <= high:
            return f"input ({self.input}) must be within min..max ({low}..{high})"
        return None

    def _prefix_problem(self) -> str | None:
        if self.prefix_share is not None and not self.prefix:
            return "prefix_share needs prefix (the shared prefix's length in tokens)"
        if self.prefix and self.prefix >= self.input:
            return f"prefix ({self.prefix}) must be shorter than input ({self.input})"
        return None

    def input_lengths(self) -> Lengths:
        # A prompt with the prefix is at least one token longer than it.
        low = max(self.min or 1, self.prefix + 1)
        span = (self.min, self.max) if self.min and self.max and not self.stddev else None
        high = self.max or MAX_INPUT
        return Lengths(self.input, self.dist, self.stddev, low, high, span)

    def output_lengths(self) -> Lengths:
        dist: Dist = self.dist if self.output_stddev else "constant"
        return Lengths(self.output, dist, self.output_stddev, 1, MAX_INPUT)


def parse(spec: str) -> Spec:
    """The ``--synthetic`` flag's ``key=value,key=value`` text as a spec; a bad one raises
    ``SuiteError`` naming the key."""
    pairs: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not key or not value:
            raise _flag_error("", f"expected key=value, got {part!r} (e.g. input=512,output=128)")
        if key in pairs:
            raise _flag_error(key, "is given twice")
        pairs[key] = value
    try:
        return Spec.model_validate(pairs)
    except ValidationError as exc:
        doc = yamlfile.Located(Path(FLAG), pairs)
        raise SuiteError(yamlfile.problems(exc, doc, model=Spec)) from exc


def _flag_error(field: str, message: str) -> SuiteError:
    return SuiteError([Problem(Path(FLAG), None, field, message)])


def prompts(spec: Spec) -> list[Prompt]:
    """The spec's ``n`` prompts, in order; the same spec gives the same prompts."""
    return list(stream(spec))


def stream(spec: Spec) -> Iterator[Prompt]:
    """``prompts`` one at a time, each made when asked for: a suite of 10^5 prompts takes
    each as it makes its case, and never holds them all as prompts too."""
    tokenizer = Tokenizer(spec.tokenizer)
    inputs, outputs = spec.input_lengths(), spec.output_lengths()
    shared = _shared_prefix(spec, tokenizer)
    with_prefix = _prefixed(spec)
    for i in range(spec.n):
        rng = random.Random(f"{spec.seed}:{i}")
        length, output = inputs.draw(rng), outputs.draw(rng)
        head = shared if i in with_prefix else ""
        body = fit(spec.language, rng, tokenizer, length, head=head)
        yield Prompt(body, language=spec.language, output_tokens=output)


def _shared_prefix(spec: Spec, tokenizer: Tokenizer) -> str:
    """The prefix text, exactly ``prefix`` tokens, ending with a line break: a break is a
    token boundary whatever follows, so the prefix's tokens stay the same at the start of
    every prompt that carries it."""
    if not spec.prefix:
        return ""
    rng = random.Random(f"{spec.seed}:prefix")
    return fit(spec.language, rng, tokenizer, spec.prefix, tail="\n")


def _prefixed(spec: Spec) -> frozenset[int]:
    """Which prompts carry the shared prefix: exactly round(n × share) of them, seeded."""
    if not spec.prefix:
        return frozenset()
    share = 1.0 if spec.prefix_share is None else spec.prefix_share
    count = round(spec.n * share)
    return frozenset(random.Random(f"{spec.seed}:share").sample(range(spec.n), count))


def fit(
    language: str,
    rng: random.Random,
    tokenizer: Tokenizer,
    tokens: int,
    *,
    head: str = "",
    tail: str = "",
) -> str:
    """``head`` + filler + ``tail`` of exactly ``tokens`` tokens (±1 when nothing gives it)."""
    fixed = tokenizer.count(head + tail)
    ids = _filler_ids(language, rng, tokenizer, tokens - fixed + 8)
    cut = max(0, tokens - fixed)
    best, best_off = "", 0
    for _ in range(_FIT_TRIES):
        best = head + tokenizer.decode(ids[:cut]) + tail
        best_off = tokenizer.count(best) - tokens
        if best_off == 0:
            return best
        cut = min(len(ids), max(0, cut - best_off))
    near = len(tokenizer.decode(ids[:cut]))
    for candidate in _near(language, tokenizer.decode(ids), near, head, tail):
        off = tokenizer.count(candidate) - tokens
        if off == 0:
            return candidate
        if abs(off) < abs(best_off):
            best, best_off = candidate, off
    if abs(best_off) > 1:
        raise SourceError(("input",), f"cannot make a prompt of {tokens} tokens ({best_off:+})")
    return best


def _near(language: str, filler: str, at: int, head: str, tail: str) -> Iterator[str]:
    """Texts cut a few characters either side of ``at``, bare and with one token added (a
    full stop, a comma or a short word, one of which stays a token of its own): what finds
    the count when no cut of token ids does, which happens when a character of two tokens
    sits across the cut."""
    pool = POOLS[language]
    near = range(max(0, at - 4), min(len(filler), at + 4) + 1)
    for pos in sorted(near, key=lambda p: abs(p - at)):
        for pad in ("", pool.stop, pool.comma, pool.pad):
            yield head + filler[:pos] + pad + tail


def _filler_ids(language: str, rng: random.Random, tokenizer: Tokenizer, tokens: int) -> list[int]:
    """Token ids of filler text at least ``tokens`` long. Sentences are drawn by an estimate
    of their length and the text encoded once (again if it falls short): encoding is the
    cost, and counting each sentence as it was drawn was seven encodes of a 64-token prompt
    where one does. How many sentences are drawn does not change the prompt: sentences
    come one after another from the prompt's own generator, and the cut is made well
    before the end of the text (``tokens`` is the length asked and a margin), where more
    text after it changes no token."""
    per_sentence = _PER_SENTENCE[language]
    sentences: list[str] = []
    ids: list[int] = []
    while len(ids) < tokens:
        for _ in range(-(-(tokens - len(ids)) // per_sentence)):  # ceil: at least one
            sentences.append(sentence(language, rng))
        ids = tokenizer.encode(joined(language, sentences))
    return ids
