"""The run documents as types: meta.json and samples.jsonl's lines, each one declaration that
is both mypy's static type and the check a reader makes (pydantic reads TypedDicts and
dataclasses as they are). Its sibling, summary.json, is typed where it is made:
``stats.summary.Summary``.

A document is checked as it is read, so that a damaged one is reported as ``where: what``
(``suite.cases[2].timeout_s: expected a number, found a string ('x')``) instead of failing
later, deep in a renderer. The types say what readers index (``meta["suite"]["cases"]``);
keys only ever read with ``.get`` are not required, as in run directories written by older
versions of perfbench, and an object whose keys are not all listed (``_OPEN``) keeps the
others. The key-by-key meaning is in docs/metrics.md; ``schema`` is bumped when a key changes.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import (
    ConfigDict,
    Field,
    GetPydanticSchema,
    Strict,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic_core import core_schema

# pydantic reads TypedDicts from typing_extensions before Python 3.12.
from typing_extensions import TypedDict

from perfbench.sample import Sample, Step
from perfbench.store.checks import Damage, found

# JSON's numbers as readers take them: an int is no float's stand-in for a count, a bool is
# no number, and 1e999 (which Python's json reads as infinity) is refused.
_RULES = ConfigDict(strict=True, allow_inf_nan=False)
_OPEN = with_config(ConfigDict(**_RULES, extra="allow"))  # other keys are kept, unchecked
_CLOSED = with_config(ConfigDict(**_RULES, extra="forbid"))  # no key but these

Count = Annotated[int, Field(ge=1)]
Passes = Annotated[int, Field(ge=0)]
# A sample line's integers are 64-bit, as orjson (which wrote them) reads them: a larger one
# is no count nor index perfbench wrote (an iteration of 10^30 would size --resume's TaskSet).
Int64 = Annotated[int, Field(ge=-(2**63), le=2**64 - 1)]
# A sample line's float, kept as it was written (3 stays 3: a resumed run writes back what it
# read), and one error when it is no number (a plain ``int | float`` reports one per member).
# An integer past 64 bits is read as the float it is near, as orjson read it.
_NUMBER = core_schema.union_schema(
    [
        core_schema.int_schema(strict=True, ge=-(2**63), le=2**64 - 1),
        core_schema.float_schema(strict=True, allow_inf_nan=False),
    ],
    custom_error_type="not_a_number",
    custom_error_message="Input should be a valid number",
)
Number = Annotated[float, GetPydanticSchema(lambda _type, _handler: _NUMBER)]


# --- meta.json ---------------------------------------------------------------------------


@_OPEN
class Owner(TypedDict):
    hostname: str
    pid: int


@_OPEN
class SuiteCase(TypedDict):
    id: str
    language: str
    tools: int  # the tool calls it expects (or the tools it declares)
    timeout_s: float
    tags: NotRequired[list[str]]
    output_tokens: NotRequired[int]  # a generated workload's asked output length


@_OPEN
class SuiteInfo(TypedDict):
    name: str
    digest: str
    cases: list[SuiteCase]


@_CLOSED
class _LoadFields(TypedDict, total=False):
    """A plan's load (adaptive or rate): closed, since ``--resume`` rebuilds the load from
    these keys and another would not fit."""

    per_second: float
    arrival: Literal["constant", "poisson"]
    duration_s: float | None
    max_in_flight: Count | None
    trace: list[float] | None  # run --trace: the arrivals replayed, seconds from 0
    start: Count
    maximum: Count
    decrease: float
    cooldown_s: float


@_CLOSED
class LoadDoc(_LoadFields, total=False):
    """The spec's load, which names its shape."""

    shape: Required[Literal["adaptive", "rate"]]


@_CLOSED
class BareLoadDoc(_LoadFields, total=False):
    """The load of meta.json's ``plan`` (``asdict``), which names no shape."""

    shape: Literal["adaptive", "rate"]


# --stages: (seconds, target) pairs, a list each in JSON.
Stage = Annotated[list[float], Field(min_length=2, max_length=2)]


@_OPEN
class _PlanFields(TypedDict, total=False):
    """``spec.Plan`` (every key: ``--resume`` rebuilds the plan from them)."""

    repeat: Count
    concurrency: Count
    workers: Count
    runs: Passes
    warmup: Passes
    seed: int
    ramp_up: float | None
    ray: str | None
    duration_s: float | None
    stages: list[Stage] | None


@_OPEN
class PlanDoc(_PlanFields, total=False):
    """The spec's plan."""

    load: LoadDoc | None


@_OPEN
class BarePlanDoc(_PlanFields, total=False):
    """meta.json's ``plan`` (kept for readers of older runs): ``asdict(Plan)``."""

    load: BareLoadDoc | None


@_OPEN
class TargetDoc(TypedDict, total=False):
    """``TargetSpec`` (every key: ``--resume`` rebuilds the target from them)."""

    target: Required[str]
    base_url: str | None
    api_key_env: str | None
    stream: bool
    retries: Passes
    max_retry_wait: float
    check_tokens: bool
    headers: list[str]
    preflight: bool
    api: str | None
    upstream: str
    record: str | None
    proxy: bool


@_OPEN
class SpecDoc(TypedDict, total=False):
    """``RunSpec.to_doc()``: how to start the run again."""

    cases: Required[list[str]]
    target: Required[TargetDoc]
    plan: Required[PlanDoc]
    label: str | None
    prices: str | None
    out: str | None
    slo: str | None
    scenario: str | None
    server_metrics: str | None
    scrape_interval: float


@_OPEN
class LoadInfo(TypedDict, total=False):
    """The load for people and for compare's notes: its shape and that shape's figures."""

    shape: Required[str]  # fixed, adaptive or rate
    concurrency: int
    ramp_up_s: float
    per_second: float
    arrival: str
    max_in_flight: int | None
    trace: list[float] | None
    start: int
    maximum: int
    decrease: float
    cooldown_s: float
    duration_s: float | None
    stages: list[Stage]


@_OPEN
class Prices(TypedDict, total=False):
    """Where the prices came from (``Pricer.source``), and as what the target was priced."""

    package: str
    timestamp: str
    overrides: str | None
    overrides_date: str | None
    priced_as: str | None
    simulated: bool


@_OPEN
class Host(TypedDict, total=False):
    """``host.fingerprint()``."""

    os: str
    kernel: str
    machine: str
    cpu: str
    cores: int | None
    python: str
    implementation: str


@_OPEN
class Ray(TypedDict, total=False):
    address: str
    actors: int
    nodes: int  # distinct nodes, once the actors ran


@_OPEN
class Headline(TypedDict, total=False):
    """What list and show print of a run without reading its summary."""

    tasks: float | None
    ok: float | None
    p50: float | None
    p95: float | None
    throughput: float | None


@_OPEN
class Meta(TypedDict, total=False):
    schema: int
    id: Required[str | None]  # the run directory's name
    status: Required[str]  # running, completed, interrupted, failed (readers: also killed)
    owner: Owner  # which process writes the run, to tell a killed run from a running one
    label: str | None
    started_at: str
    finished_at: str | None
    duration_s: float | None
    resumed: list[str]  # when each --resume took it up
    runs_auto: dict[str, Any]  # run --runs auto: the runs it settled on, and why
    suite: Required[SuiteInfo]
    target: Required[str]  # the target's key-free name (mock+http:default)
    load: LoadInfo
    plan: BarePlanDoc
    prices: Prices
    spec: SpecDoc
    perfbench_version: str
    packages: dict[str, str]
    host: Host
    headline: Headline | None  # tasks, ok, p50, p95 (list and show read it)
    error: str  # why a failed run failed
    stopped_by: str  # what interrupted it: SIGINT (Ctrl-C), SIGTERM, a Ray actor lost
    nodes: list[str]  # --ray: where each worker's actor ran (host:node id)
    ray: Ray  # --ray: where the run is described
    invocation: dict[str, Any]  # how runs were started before specs were recorded


_META = TypeAdapter(Meta)


def check_meta(doc: Any) -> None:
    """Raise ``Damage`` at the first place ``doc`` is not a meta.json its readers can use.
    The document itself is kept as read (pydantic's copy would turn 3 into 3.0 and reorder
    keys), so that a resumed run writes back what it read."""
    try:
        _META.validate_python(doc)
    except ValidationError as exc:
        raise damage(exc) from None


# --- sweep-plan.json ---------------------------------------------------------------------

Positive = Annotated[float, Field(gt=0)]
# sweep --slo: [the metric (or the goodput objectives), its limit]; a list in JSON.
SloPair = Annotated[tuple[Annotated[str, Strict()], Annotated[float, Strict()]], Strict(False)]


@_CLOSED
class StopRuleDoc(TypedDict):
    error_budget: float
    p95_factor: float
    min_gain: float


@_OPEN
class SweepPlanDoc(TypedDict, total=False):
    """``spec.SweepPlan``: the levels and the rule that stops the sweep, over a base plan."""

    base: Required[PlanDoc]
    levels: Required[list[Positive]]
    rates: Required[bool]
    max_level: Required[Positive]
    rule: Required[StopRuleDoc]
    bisect_steps: Required[Passes]
    slo: Required[SloPair | None]
    workers: Passes


@_OPEN
class SweepDoc(TypedDict, total=False):
    """sweep-plan.json: ``SweepSpec.to_doc()`` and the sweep's status."""

    status: Required[str]
    cases: Required[list[str]]
    target: Required[TargetDoc]
    plan: Required[SweepPlanDoc]
    suite_digest: str
    label: str | None
    prices: str | None
    out: str | None
    server_metrics: str | None
    scrape_interval: float


_SWEEP = TypeAdapter(SweepDoc)


def check_sweep(doc: Any) -> None:
    """Raise ``Damage`` at the first place ``doc`` is not a sweep-plan.json ``sweep --resume``
    can take up. A sweep started before specs were recorded named its target by a string
    (beside ``options``): checked as the target it names."""
    if isinstance(doc, dict) and isinstance(doc.get("target"), str):
        doc = {**doc, "target": {"target": doc["target"]}}
    try:
        _SWEEP.validate_python(doc)
    except ValidationError as exc:
        raise damage(exc) from None


# --- samples.jsonl -------------------------------------------------------------------------


def _line_type(cls: type, derived: Mapping[str, object]) -> Any:
    """The JSON object of a dataclass as ``to_json`` writes it, derived from its fields (a new
    field is checked without a change here): fields without a default required, the derived
    keys (``latency``) allowed, no other key (``Sample(**line)`` would refuse it); a float is a
    ``Number``."""
    hints = typing.get_type_hints(cls)
    keys = {}
    for f in dataclasses.fields(cls):
        hint = _json_hint(hints[f.name])
        needed = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        keys[f.name] = hint if needed else NotRequired[hint]
    keys.update((name, NotRequired[hint]) for name, hint in derived.items())
    return _CLOSED(TypedDict(f"{cls.__name__}Line", keys))  # type: ignore[operator]


def _json_hint(hint: Any) -> Any:
    """``hint`` with ``Step`` as its line, each float a ``Number`` and each int an ``Int64``."""
    if hint is Step:
        return _STEP
    if hint is float:
        return Number
    if hint is int:
        return Int64
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list:
        return types.GenericAlias(list, (_json_hint(args[0]),))
    if typing.get_origin(hint) in (types.UnionType, typing.Union):  # X | None
        return functools.reduce(operator.or_, map(_json_hint, args))
    return hint


_STEP = _line_type(Step, {})
_DERIVED = ("latency", "latency_intended")  # Sample's properties, written for readers
_SAMPLE = TypeAdapter(_line_type(Sample, dict.fromkeys(_DERIVED, Number | None)))


def read_sample(line: bytes) -> Sample:
    """A samples.jsonl line as its ``Sample``: parsed and checked in one pass (pydantic's
    ``validate_json``, 2.5× faster than orjson and a hand-written check, tests/bench/
    sample_lines.py). Raises ``Damage`` where the line is not a sample."""
    try:
        doc = _SAMPLE.validate_json(line)
    except ValidationError as exc:
        raise damage(exc) from None
    for key in _DERIVED:
        doc.pop(key, None)
    doc["steps"] = [Step(**s) for s in doc.get("steps", ())]
    return Sample(**doc)


# --- pydantic's errors, said as where: what ------------------------------------------------

_EXPECTED = {
    "dict_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "not_a_number": "a finite number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "none_required": "null",
}


def damage(exc: ValidationError) -> Damage:
    """The first of pydantic's errors as ``Damage``: ``steps[0].ttft: expected a number,
    found a string ('x')``, in the words the checks of summary.json use."""
    error = exc.errors(include_url=False)[0]
    kind, loc = error["type"], error["loc"]
    if kind == "json_invalid":
        return Damage("", f"not a JSON line ({error['ctx']['error']})")
    if kind == "missing":
        return Damage(where(loc[:-1]), f"the key '{loc[-1]}' is missing")
    if kind == "extra_forbidden":
        return Damage(where(loc), "not a key this document has")
    expected = _EXPECTED.get(kind)
    if expected is None and kind == "literal_error":
        expected = error["ctx"]["expected"]
    if expected is None:  # a bound (a count of 0, a third item in a pair): pydantic's words
        return Damage(where(loc), _lower(error["msg"]))
    return Damage(where(loc), f"expected {expected}, found {found(error['input'])}")


def where(loc: Sequence[int | str]) -> str:
    """``("steps", 0, "ttft")`` as ``steps[0].ttft``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _lower(message: str) -> str:
    return message[:1].lower() + message[1:]
