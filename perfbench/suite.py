"""Case suites: the deterministic input of every run.

A suite is one YAML file or a folder of them (searched recursively, in sorted path order). Each
file holds ``cases:`` and optional ``defaults:`` that every case of that file inherits, or a
``source:`` block (``perfbench.sources``) whose prompts become cases, or both. Every mistake
is reported with file, line and field; see ``perfbench.errors.CaseError``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from perfbench import yamlfile
from perfbench.errors import CaseError, Problem, SuiteError
from perfbench.language import detect_language

if TYPE_CHECKING:
    from perfbench.load.trace import Arrival
    from perfbench.sources import Prompt, SourceError, synthetic

SUFFIXES = (".yaml", ".yml")
_NAME = r"^[A-Za-z0-9_.\-]{1,64}$"
# The largest max_tokens a case may ask: servers written in Go or Rust, and protobuf APIs,
# read it as a 32-bit integer and refuse more; no model comes near it.
MAX_TOKENS = 2**31 - 1
# Generated suites of up to this many prompts are made whole before the run, as they were:
# a streamed suite's prompts are made in the pass, between its tasks (~0.12 ms of client CPU
# each on a quiet machine; against mock:zero 3,000 prompts ran at 1,200 tasks/s streamed,
# 4,000 made first), so only a suite too large to make first (10^5: ~50 s, docs/cases.md)
# pays that in its passes.
HELD_UP_TO = 5_000
_JSON_TYPES = ("string", "number", "integer", "boolean", "array", "object", "null")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tool(_Strict):
    """A tool the agent may call; its result and latency are canned so runs are deterministic."""

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    result: str | dict[str, Any] | list[Any] = ""
    latency_ms: float = Field(default=0.0, ge=0, le=3_600_000)

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError("must be a JSON schema with type: object")
        wrong = _schema_problem(value)
        if wrong:
            raise ValueError(wrong)
        return value

    def result_text(self) -> str:
        """The canned result as the text a model would receive."""
        if isinstance(self.result, str):
            return self.result
        return json.dumps(self.result, ensure_ascii=False, sort_keys=True)


def _schema_problem(schema: dict[str, Any], at: yamlfile.Loc = ()) -> str | None:
    """What in a tool's JSON schema servers refuse and the mock cannot fill in with arguments
    (it reads type, enum, required, properties and items), or None: check passing a schema
    that every run then fails on was worse than saying so here."""
    wrong = _keyword_problem(schema, at)
    if wrong:
        return wrong
    for where, sub in _subschemas(schema, at):
        if not isinstance(sub, dict):
            name = yamlfile.dotted(where)
            return f"{name} must be a schema, a mapping such as {{type: string}} ({{}}: any value)"
        wrong = _schema_problem(sub, where)
        if wrong:
            return wrong
    return None


def _keyword_problem(schema: dict[str, Any], at: yamlfile.Loc) -> str | None:
    kinds = schema.get("type", [])
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "type" in schema and not (kinds and all(k in _JSON_TYPES for k in kinds)):
        types = ", ".join(_JSON_TYPES)
        return f"{yamlfile.dotted((*at, 'type'))} must be one of {types} (or a list of them)"
    if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
        return f"{yamlfile.dotted((*at, 'enum'))} must be a list of at least one value"
    required = schema.get("required", [])
    if not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        return f"{yamlfile.dotted((*at, 'required'))} must be a list of property names"
    if not isinstance(schema.get("properties", {}), dict):
        return f"{yamlfile.dotted((*at, 'properties'))} must map each property name to its schema"
    return None


def _subschemas(schema: dict[str, Any], at: yamlfile.Loc) -> list[tuple[yamlfile.Loc, Any]]:
    props: dict[str, Any] = schema.get("properties", {})
    subs = [((*at, "properties", name), sub) for name, sub in props.items()]
    if "items" in schema:
        subs.append(((*at, "items"), schema["items"]))
    return subs


class Message(_Strict):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class Expect(_Strict):
    """What a correct run of the case looks like; a mismatch is measured and counted, not hidden."""

    tool_calls: list[str] = Field(default_factory=list)
    output_contains: list[str] = Field(default_factory=list)

    @field_validator("output_contains", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def check(self, tool_calls: Sequence[str], output: str | None) -> bool | None:
        """Whether an answer meets this expectation: the tools called, in order, are
        ``tool_calls``, and the output contains every ``output_contains`` string, ignoring
        case. None when nothing is expected. Every target scores its answers here."""
        if not self.tool_calls and not self.output_contains:
            return None
        if self.tool_calls and list(tool_calls) != self.tool_calls:
            return False
        folded = (output or "").casefold()
        return all(s.casefold() in folded for s in self.output_contains)


class Case(_Strict):
    """One agent task. ``input`` (a user message), ``messages`` (a conversation to answer) or
    ``turns`` (user turns, each sent after the model's answer to the last): one of them."""

    id: str = Field(pattern=_NAME)
    name: str = ""
    language: str = Field(default="", pattern=r"^$|^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
    tags: list[str] = Field(default_factory=list)
    input: str | None = Field(default=None, min_length=1)
    messages: list[Message] | None = Field(default=None, min_length=1)
    # A multi-turn conversation: each user turn sent after the model's real answer to the one
    # before (its tool calls run on the way), so every turn's context is what a user would
    # have. One task is the whole conversation.
    turns: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    system: str | None = None
    tools: list[Tool] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    max_steps: int = Field(default=8, ge=1, le=100)
    # The tools one model turn calls run at once, as agent runtimes run them (openai-agents,
    # pydantic-ai); false: one after the other.
    parallel_tools: bool = True
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    # Its share of the mix (Locust's task weights): executed weight × --repeat times a pass,
    # interleaved round by round with the other cases; in a timed or open loop, as often.
    weight: int = Field(default=1, ge=1, le=1000)
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    # The exact output length asked: model clients send it as max_tokens with the extras
    # (min_tokens, ignore_eos) that make servers honouring them answer with that many
    # tokens, so runs of different servers generate the same work.
    output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)

    @model_validator(mode="before")
    @classmethod
    def _cap_at_output(cls, data: Any) -> Any:
        """``max_tokens`` is ``output_tokens`` when not given: the length asked is a cap too."""
        if not isinstance(data, dict) or data.get("max_tokens") is not None:
            return data
        if isinstance(data.get("output_tokens"), int):
            return {**data, "max_tokens": data["output_tokens"]}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Case:
        if [self.input, self.messages, self.turns].count(None) != 2:
            raise ValueError("give exactly one of 'input', 'messages' or 'turns'")
        if self.output_tokens and self.max_tokens and self.max_tokens < self.output_tokens:
            wanted = f"max_tokens ({self.max_tokens}) is below output_tokens ({self.output_tokens})"
            raise ValueError(f"{wanted}: the output asked cannot fit")
        names = [t.name for t in self.tools]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tool names must be unique in a case; repeated: {', '.join(dup)}")
        return self

    def prompt_text(self) -> str:
        """All the text the case sends, for language detection and size."""
        if self.input is not None:
            return self.input
        if self.turns is not None:
            return "\n".join(self.turns)
        return "\n".join(m.content for m in self.messages or [])

    @property
    def tool_count(self) -> int:
        return len(self.expect.tool_calls)


class _Defaults(_Strict):
    language: str | None = None
    tags: list[str] | None = None
    system: str | None = None
    tools: list[dict[str, Any]] | None = None
    max_steps: int | None = None
    timeout_s: float | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    output_tokens: int | None = None


class _File(_Strict):
    defaults: _Defaults = Field(default_factory=_Defaults)
    cases: list[dict[str, Any]] | None = Field(default=None, min_length=1)
    # Validated by perfbench.sources.block (imported only when a file has one).
    source: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Found:
    case: Case
    path: Path
    line: int | None  # where the case starts
    id_line: int | None  # where its `id:` is


# Fields added after suites were first digested: left out at their default, so a suite that
# does not use them keeps its digest (and stays comparable with runs made before).
_LATER_FIELDS: dict[str, Any] = {
    "parallel_tools": True,
    "output_tokens": None,
    "turns": None,
    "weight": 1,
}


def _json(doc: Any) -> str:
    """The digest's JSON: a list of these, joined by commas in brackets, is ``_json`` of the
    list (the separators are the same)."""
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _canonical(case: Case) -> dict[str, Any]:
    doc = case.model_dump(mode="json")
    for name, default in _LATER_FIELDS.items():
        if doc.get(name) == default:
            del doc[name]
    return doc


class _Digest:
    """The suite digest, hashed a case at a time in id order: the JSON list of the cases,
    written as it is hashed (10^5 cases were 10^5 dicts and one text of them all first)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256(b"[")
        self._last: str | None = None

    def add(self, case: Case) -> None:
        if self._last is not None:
            if case.id <= self._last:  # a generated suite's ids sort as they are made
                raise AssertionError(f"case {case.id} came after {self._last}: not in id order")
            self._sha.update(b",")
        self._last = case.id
        self._sha.update(_json(_canonical(case)).encode())

    def hexdigest(self) -> str:
        copy = self._sha.copy()
        copy.update(b"]")
        return copy.hexdigest()


class Brief(NamedTuple):
    """What meta.json keeps of a case (its ``suite.cases``), without its text."""

    id: str
    language: str
    tags: list[str]
    tools: int  # the tool calls it expects (or the tools it declares)
    timeout_s: float
    output_tokens: int | None

    @classmethod
    def of(cls, case: Case) -> Brief:
        tools = len(case.expect.tool_calls) or len(case.tools)
        return cls(case.id, case.language, case.tags, tools, case.timeout_s, case.output_tokens)


class Streamed(Sequence[Case]):
    """A generated suite's cases, made again each time they are read, never all held: a
    10^5-prompt suite took ~50 s to make before its first request went out. Each complete
    reading hashes the digest as it goes and keeps each case's ``Brief`` (meta.json's case
    list, written as the run ends); a later reading must hash the same digest (a second run
    streams the same prompts from the seed). Every case has weight 1 and ``timeout_s``,
    no tools and no turns (generated cases take no defaults), so a run's plan needs no
    reading, and a target's check the first case only.
    ``make`` is picklable (a module-level function and its arguments): worker processes
    get the recipe, not the cases."""

    def __init__(
        self, ids: Sequence[str], make: Callable[[], Iterable[Case]], timeout_s: float
    ) -> None:
        self.ids, self._make, self.timeout_s = ids, make, timeout_s
        self.digest: str | None = None  # known once a reading has gone to the end
        self.briefs: list[Brief] | None = None
        self.partial: list[Brief] = []  # the longest reading's so far, none complete

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[Case]:
        digest, briefs = _Digest(), list[Brief]()
        if self.briefs is None:
            self.partial = briefs
        for case in self._make():
            if case.weight != 1 or case.timeout_s != self.timeout_s or case.tools or case.turns:
                raise AssertionError(f"generated case {case.id} is not like the first one")
            digest.add(case)
            briefs.append(Brief.of(case))
            yield case
        made = digest.hexdigest()
        if self.digest is not None and made != self.digest:
            message = f"the cases made again differ from the first ones (digest {made[:12]})"
            raise SuiteError([Problem(Path("<generated>"), None, "", message)])
        self.digest, self.briefs = made, briefs

    @overload
    def __getitem__(self, at: int) -> Case: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[Case]: ...
    def __getitem__(self, at: int | slice) -> Case | Sequence[Case]:
        if isinstance(at, slice):  # made up to the slice's end only
            start, stop, step = at.indices(len(self))
            return tuple(itertools.islice(self._make(), start, stop, step))
        if not -len(self) <= at < len(self):
            raise IndexError(at)
        return next(itertools.islice(self._make(), at % len(self), None))

    def __getstate__(self) -> dict[str, Any]:
        # A worker gets the recipe, not the briefs.
        return {**self.__dict__, "briefs": None, "partial": []}


@dataclass(frozen=True)
class Suite:
    """Validated cases in execution order, with where each came from and the suite digest.
    ``cases`` is a tuple, or a generated suite's ``Streamed`` cases."""

    name: str
    cases: Sequence[Case]
    sources: Mapping[str, str]  # case id -> "file:line"

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 over the normalised cases, independent of file layout and key order: the
        JSON list of the cases sorted by id. Made once; a streamed suite's is read from its
        cases' last complete reading, or made by one."""
        if isinstance(self.cases, Streamed):
            if self.cases.digest is None:
                for _ in self.cases:  # one reading: its end records the digest
                    pass
            assert self.cases.digest is not None
            return self.cases.digest
        digest = _Digest()
        for case in sorted(self.cases, key=lambda c: c.id):
            digest.add(case)
        return digest.hexdigest()

    @property
    def streamed(self) -> Streamed | None:
        return self.cases if isinstance(self.cases, Streamed) else None

    def briefs(self) -> Iterable[Brief]:
        """meta.json's case list; a streamed suite's from its last complete reading (made by
        one when there was none)."""
        streamed = self.streamed
        if streamed is None:
            return (Brief.of(c) for c in self.cases)
        if streamed.briefs is None:
            for _ in streamed:  # one reading: its end records them (and checks the digest)
                pass
        assert streamed.briefs is not None
        return streamed.briefs

    def checked(self) -> Sequence[Case]:
        """The cases a target's check must see: every one; a streamed suite's first (its
        cases differ only in id, text and lengths)."""
        return self.cases[:1] if self.streamed is not None else self.cases

    def ids(self) -> Sequence[str]:
        """The case ids in order (a streamed suite's without making its cases)."""
        streamed = self.streamed
        return streamed.ids if streamed is not None else [c.id for c in self.cases]

    def timeouts(self) -> Mapping[str, float]:
        """Each case's timeout by id (the summarizer's)."""
        streamed = self.streamed
        if streamed is not None:
            return dict.fromkeys(streamed.ids, streamed.timeout_s)
        return {c.id: c.timeout_s for c in self.cases}

    @property
    def heaviest(self) -> int:
        """The largest case weight."""
        if self.streamed is not None:
            return 1
        return max((c.weight for c in self.cases), default=1)

    def per_pass(self, repeat: int) -> int:
        """Tasks in one pass over the suite: each case weight × ``repeat`` times."""
        if self.streamed is not None:
            return len(self.cases) * repeat
        return sum(c.weight for c in self.cases) * repeat

    @property
    def languages(self) -> list[str]:
        return sorted({c.language for c in self.cases})

    @classmethod
    def of(cls, name: str, cases: Sequence[Case]) -> Suite:
        """A suite made in memory (calibration, tests, library callers), not read from files;
        each case's language must be given (files get theirs detected when absent)."""
        ids = [c.id for c in cases]
        if not cases or len(set(ids)) != len(ids):
            raise SuiteError([Problem(Path(name), None, "cases", "expected unique case ids")])
        return cls(name, tuple(cases), {c.id: f"<{name}>" for c in cases})


def load_suite(paths: list[Path]) -> Suite:
    """Load and validate every case file under ``paths``; raise ``CaseError`` listing every
    problem found (all files are checked, so one run of ``cases check`` shows them all)."""
    files = _case_files(paths)
    found: list[_Found] = []
    errors: list[Problem] = []
    whole_suite = True  # every problem so far concerns the suite as a whole
    for file in files:
        try:
            found.extend(_load_file(file))
        except CaseError as exc:
            errors.extend(exc.problems)
            whole_suite &= isinstance(exc, SuiteError)
    duplicates = _duplicates(found)
    if errors or duplicates:
        raise (SuiteError if whole_suite else CaseError)([*errors, *duplicates])
    return Suite(
        name=_suite_name(paths),
        cases=tuple(f.case for f in found),
        sources={f.case.id: f"{f.path}:{f.line}" for f in found},
    )


def _case_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not inside:
                raise SuiteError([Problem(path, None, "", "folder holds no .yaml/.yml case files")])
            files.extend(inside)
        elif path.is_file():
            files.append(path)
        else:
            raise SuiteError([Problem(path, None, "", "no such file or folder")])
    return files


def _load_file(path: Path) -> list[_Found]:
    try:
        doc = yamlfile.load(path)
    except yamlfile.YamlProblem as exc:
        raise CaseError([exc.problem]) from exc
    if doc.data is None:
        raise SuiteError(
            [Problem(path, None, "", "file is empty; expected a mapping with 'cases:'")]
        )
    if not isinstance(doc.data, dict):
        line = doc.line_of(())
        raise CaseError([Problem(path, line, "", "expected a mapping with 'cases:' at the top")])
    # Top-level keys starting with `x-` are free: they hold YAML anchors shared by cases.
    data = {k: v for k, v in doc.data.items() if not str(k).startswith("x-")}
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        problems = yamlfile.problems(exc, doc, model=_File)
        empty = any(p.field == "cases" and "at least 1" in p.message for p in problems)
        raise (SuiteError if empty else CaseError)(problems) from exc
    if parsed.cases is None and parsed.source is None:
        msg = "is required but missing (or a 'source:' block that makes the cases)"
        raise CaseError([Problem(path, doc.line_of(()), "cases", msg)])
    defaults = parsed.defaults.model_dump(exclude_none=True)
    _check_defaults(defaults, doc)
    out: list[_Found] = []
    errors: list[Problem] = []
    for i, raw in enumerate(parsed.cases or []):
        try:
            case = _case(raw, defaults, doc, i)
            line, id_line = doc.line_of(("cases", i)), doc.line_of(("cases", i, "id"))
            out.append(_Found(case, path, line, id_line))
        except CaseError as exc:
            errors.extend(exc.problems)
    if parsed.source is not None:
        try:
            out.extend(_generated(parsed.source, defaults, doc))
        except CaseError as exc:
            errors.extend(exc.problems)
    if errors:
        raise CaseError(errors)
    return out


def _generated(
    raw: dict[str, Any], defaults: dict[str, Any], doc: yamlfile.Located
) -> list[_Found]:
    """The cases a file's ``source:`` block makes, with the file's defaults."""
    # Imported here: the sources (and their tokenizer) load only for files that use one.
    from perfbench.sources import SourceError
    from perfbench.sources.block import Source

    try:
        source = Source.model_validate(raw)
    except ValidationError as exc:
        raise CaseError(yamlfile.problems(exc, doc, prefix=("source",), model=Source)) from exc
    loc: yamlfile.Loc = ("source", source.kind)
    try:
        made = source.make(doc.path.parent)
    except SourceError as exc:
        raise CaseError([_source_problem(exc, doc.path, doc, loc)]) from exc
    found, errors = [], []
    for case_id, prompt in made:
        path, line = prompt.origin or (doc.path, None)
        if line is None:  # a format without lines: the case is where the source is named
            path, line = doc.path, doc.line_of(loc)
        try:
            found.append(
                _Found(_prompt_case(case_id, prompt, defaults, (path, line)), path, line, line)
            )
        except CaseError as exc:
            errors.extend(exc.problems)
    if errors:
        raise CaseError(errors)
    return found


def _source_problem(
    exc: SourceError, where: Path, doc: yamlfile.Located | None, loc: yamlfile.Loc
) -> Problem:
    """A source's problem, located: in its data file, or at its setting in ``doc`` (the
    case file; None for the ``--synthetic`` flag, which has no lines)."""
    if exc.file is not None:
        return Problem(exc.file, exc.line, yamlfile.dotted(exc.field), exc.message)
    at = (*loc, *exc.field)
    line = doc.line_of(at) if doc is not None else None
    return Problem(where, line, yamlfile.dotted(at), exc.message)


def _prompt_case(
    case_id: str, prompt: Prompt, defaults: dict[str, Any], where: tuple[Path, int | None]
) -> Case:
    """A source's prompt as a case; a case field it cannot fill is reported where the prompt
    came from, naming the case."""
    fields: dict[str, Any] = {"id": case_id}
    if prompt.turns is not None:  # a conversation: each turn follows the model's real answer
        fields["turns"] = list(prompt.turns)
    else:
        fields["input"] = prompt.text
    if prompt.name:
        fields["name"] = prompt.name
    if prompt.language:
        fields["language"] = prompt.language
    if prompt.output_tokens is not None:  # the length asked is the cap, whatever defaults say
        fields["output_tokens"] = fields["max_tokens"] = prompt.output_tokens
    elif prompt.max_tokens is not None:
        fields["max_tokens"] = prompt.max_tokens
    try:
        case = Case.model_validate({**defaults, **fields})
    except ValidationError as exc:
        located = yamlfile.problems(exc, yamlfile.Located(where[0], None), model=Case)
        raise CaseError(
            [Problem(where[0], where[1], p.field, f"{p.message} (case {case_id})") for p in located]
        ) from exc
    if not case.language:
        case = case.model_copy(update={"language": detect_language(case.prompt_text())})
    return case


def synthetic_suite(spec: str) -> Suite:
    """The suite of ``perfbench run --synthetic SPEC``: the prompts of a synthetic spec
    (``key=value,…``; see ``perfbench.sources.synthetic``) as cases; more than
    ``HELD_UP_TO`` streamed: each made as the run takes it (``Streamed``). A bad spec
    raises ``SuiteError`` naming the key; the first case is made here, so a spec no prompt
    can be made of is refused before the run, as is anything else the first case shows."""
    from perfbench.sources import case_ids, synthetic

    parsed = synthetic.parse(spec)
    ids = case_ids(parsed.id_prefix, parsed.n)
    timeout = Case.model_fields["timeout_s"].default
    cases = Streamed(ids, functools.partial(_synthetic_cases, parsed), timeout)
    _ = cases[0]
    return Suite("synthetic", _held(cases), dict.fromkeys(ids, synthetic.FLAG))


def _held(cases: Streamed) -> Sequence[Case]:
    """A generated suite's cases as the run takes them: made now when they are few
    (``HELD_UP_TO``), streamed otherwise."""
    return tuple(cases) if len(cases) <= HELD_UP_TO else cases


def _synthetic_cases(parsed: synthetic.Spec) -> Iterator[Case]:
    """A synthetic spec's cases in order, made one at a time."""
    from perfbench.sources import SourceError, case_ids, synthetic

    flag = Path(synthetic.FLAG)
    try:
        yield from _alike(
            case_ids(parsed.id_prefix, parsed.n), synthetic.stream(parsed), (flag, None)
        )
    except SourceError as exc:
        raise SuiteError([_source_problem(exc, flag, None, ())]) from exc
    except CaseError as exc:
        raise SuiteError(exc.problems) from exc


def _alike(
    ids: Iterable[str], made: Iterable[Prompt], where: tuple[Path, int | None]
) -> Iterator[Case]:
    """The cases of prompts that differ only in id, text and lengths (a synthetic spec's), as
    ``_prompt_case`` makes them: the first validated, each next one a copy of it with its own
    id, text and length asked, so long as those are what validation would take as they are
    (a text, a length within bounds, the first one's language and name). Validating each was
    ~160 µs of a 10^5-prompt suite's set-up a case; a copy is a few, and shares the first
    one's tags, tools and expectations (a case is frozen)."""
    first: Case | None = None
    for case_id, prompt in zip(ids, made, strict=True):
        if first is not None and _like(first, prompt):
            length = prompt.output_tokens
            update = {"id": case_id, "input": prompt.text, "output_tokens": length,
                      "max_tokens": length}  # fmt: skip
            yield first.model_copy(update=update)
            continue
        case = _prompt_case(case_id, prompt, {}, where)
        first = first or case
        yield case


def _like(first: Case, prompt: Prompt) -> bool:
    length = prompt.output_tokens
    return (
        bool(prompt.text)
        and prompt.turns is None
        and prompt.max_tokens is None
        and length is not None
        and 1 <= length <= MAX_TOKENS
        and first.input is not None
        and first.output_tokens is not None
        and prompt.language == first.language
        and prompt.name == first.name
    )


def trace_suite(path: Path) -> Suite:
    """The suite of ``perfbench run --trace FILE`` without cases: one case per line of a
    trace that gives each request's length (``perfbench.sources.trace``), in arrival order,
    so the replay's n-th arrival runs the n-th case. A trace without lengths, or a line
    without one, raises ``SuiteError`` naming the file (and line)."""
    from perfbench.load import trace as trace_file
    from perfbench.sources import case_ids
    from perfbench.sources import trace as shapes

    arrivals = trace_file.arrivals(path)  # a TraceError names the file and line itself
    if not shapes.shaped(arrivals):
        message = (
            "its lines give no input_length: give cases to run at its arrival times, or a "
            "trace with input_length (and output_length) on each line"
        )
        raise SuiteError([Problem(path, None, "", message)])
    missing = next((a for a in arrivals if a.input_length is None), None)
    if missing is not None:  # found now, not when the run reaches that line
        message = "is missing: a trace that shapes its requests gives every line one"
        raise SuiteError([Problem(path, missing.line, "input_length", message)])
    ids = case_ids(shapes.ID_PREFIX, len(arrivals))
    timeout = Case.model_fields["timeout_s"].default
    cases = Streamed(ids, functools.partial(_trace_cases, path, arrivals), timeout)
    _ = cases[0]  # a prompt made here: what the first case shows is refused before the run
    sources = {i: f"{path}:{a.line}" for i, a in zip(ids, arrivals, strict=True)}
    return Suite(f"trace-{path.stem}", _held(cases), sources)


def _trace_cases(path: Path, arrivals: Sequence[Arrival]) -> Iterator[Case]:
    """A shaped trace's cases in arrival order, made one at a time."""
    from perfbench.sources import SourceError, case_ids
    from perfbench.sources import trace as shapes

    ids = case_ids(shapes.ID_PREFIX, len(arrivals))
    made = shapes.stream(arrivals, path)  # a prompt made as its case is
    try:
        for i, p, a in zip(ids, made, arrivals, strict=True):
            yield _prompt_case(i, p, {}, (path, a.line))
    except SourceError as exc:
        raise SuiteError([_source_problem(exc, path, None, ())]) from exc
    except CaseError as exc:
        raise SuiteError(exc.problems) from exc


def _check_defaults(defaults: dict[str, Any], doc: yamlfile.Located) -> None:
    """Validate ``defaults:`` once, where they are written, with the case rules; otherwise a
    bad default would be reported once per case, at each case's line."""
    try:
        Case.model_validate({**defaults, "id": "defaults", "input": "-"})
    except ValidationError as exc:
        problems = yamlfile.problems(exc, doc, prefix=("defaults",), model=Case)
        raise CaseError(problems) from exc


def _case(raw: Any, defaults: dict[str, Any], doc: yamlfile.Located, i: int) -> Case:
    loc: yamlfile.Loc = ("cases", i)
    if not isinstance(raw, dict):
        raise CaseError(
            [Problem(doc.path, doc.line_of(loc), yamlfile.dotted(loc), "expected a mapping")]
        )
    try:
        case = Case.model_validate({**defaults, **raw})
    except ValidationError as exc:
        raise CaseError(yamlfile.problems(exc, doc, prefix=loc, model=Case)) from exc
    _check_expect(case, doc, loc)
    if not case.language:
        case = case.model_copy(update={"language": detect_language(case.prompt_text())})
    return case


def _check_expect(case: Case, doc: yamlfile.Located, loc: yamlfile.Loc) -> None:
    declared = {t.name for t in case.tools}
    problems = []
    for j, name in enumerate(case.expect.tool_calls):
        if name not in declared:
            where = (*loc, "expect", "tool_calls", j)
            known = ", ".join(sorted(declared)) or "none"
            msg = f"tool {name!r} is not declared in this case's tools (declared: {known})"
            problems.append(Problem(doc.path, doc.line_of(where), yamlfile.dotted(where), msg))
    if problems:
        raise CaseError(problems)


def _duplicates(found: list[_Found]) -> list[Problem]:
    first: dict[str, _Found] = {}
    problems = []
    for f in found:
        seen = first.setdefault(f.case.id, f)
        if seen is not f:
            msg = f"duplicate case id '{f.case.id}' (first defined at {seen.path}:{seen.id_line})"
            problems.append(Problem(f.path, f.id_line, "id", msg))
    return problems


def _suite_name(paths: list[Path]) -> str:
    names = [p.resolve().stem if p.is_file() else p.resolve().name for p in paths]
    return "+".join(names) or "suite"
