"""What a reader checks before it trusts summary.json (meta.json, sweep-plan.json and the
lines of samples.jsonl are typed documents checked by pydantic: ``store.documents``).

A run directory outlives the process that wrote it: it is copied, edited by hand, cut short by
a full disk or a kill, restored from a backup. Every document is checked against the shape its
readers rely on as it is read, so a damaged file is reported as ``file: where: what`` with how
to fix it, instead of failing later, deep in a renderer, with a traceback.

A shape is a small tree of ``Leaf`` (one JSON value), ``Obj`` (an object's keys), ``ListOf``,
``MapOf`` (an object of any keys), ``Maybe`` (or null) and ``AnyOf``. The shapes say what
readers index (``summary["pooled"]["overall"]``); keys only ever read with ``.get`` may be
absent, as in run directories written by older versions of perfbench.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfbench.stats.histogram import decode, release


@dataclass(frozen=True)
class Leaf:
    """One JSON value that passes ``test``; ``expected`` says what it should be, for people.
    ``types``: when ``test`` only asks for one of these types, so the compiled check of an
    object tests the type in line (a sample line has ~40 such keys)."""

    expected: str
    test: Callable[[Any], bool]
    types: frozenset[type] | None = None


@dataclass(frozen=True)
class Obj:
    """A JSON object: ``required`` keys, ``optional`` ones, and any others if ``closed`` is
    false (checked only to hold finite numbers)."""

    required: Mapping[str, Shape]
    optional: Mapping[str, Shape] = field(default_factory=dict)
    closed: bool = False


@dataclass(frozen=True)
class ListOf:
    item: Shape


@dataclass(frozen=True)
class MapOf:
    """A JSON object whose keys are names (cases, languages, metrics) and values ``value``."""

    value: Shape


@dataclass(frozen=True)
class Maybe:
    """``shape`` or null."""

    shape: Shape


@dataclass(frozen=True)
class AnyOf:
    """One of ``shapes`` (a document format that changed between versions)."""

    shapes: tuple[Shape, ...]


Shape = Leaf | Obj | ListOf | MapOf | Maybe | AnyOf


class Damage(Exception):
    """Where in a document (``suite.cases[2].timeout_s``) it is not what readers expect."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}" if where else what)


def check(value: Any, shape: Shape, where: str = "") -> None:
    """Raise ``Damage`` at the first place ``value`` does not have ``shape``. A sound value
    is passed by the compiled test (a sample line is checked in a few µs, not the ~70 µs the
    walk below takes, which is what reading a million of them for an export would add); the
    walk, which says where and what, runs only on a value that failed it."""
    if not _compiled(shape)(value):
        _locate(value, shape, where)
        raise Damage(where, "not what its readers expect")  # the two tests disagree: a bug


def _locate(value: Any, shape: Shape, where: str) -> None:
    if isinstance(shape, Maybe):
        if value is not None:
            _locate(value, shape.shape, where)
    elif isinstance(shape, Leaf):
        if not shape.test(value):
            raise Damage(where, f"expected {shape.expected}, found {found(value)}")
    elif isinstance(shape, Obj):
        _check_obj(value, shape, where)
    elif isinstance(shape, AnyOf):
        _check_any(value, shape, where)
    elif isinstance(shape, ListOf):
        if not isinstance(value, list):
            raise Damage(where, f"expected a list, found {found(value)}")
        for i, item in enumerate(value):
            _locate(item, shape.item, f"{where}[{i}]")
    else:
        if not isinstance(value, dict):
            raise Damage(where, f"expected an object, found {found(value)}")
        for key, item in value.items():
            _locate(item, shape.value, _join(where, key))


def _check_obj(value: Any, shape: Obj, where: str) -> None:
    if not isinstance(value, dict):
        raise Damage(where, f"expected an object, found {found(value)}")
    for key, item_shape in shape.required.items():
        if key not in value:
            raise Damage(where, f"the key '{key}' is missing")
        _locate(value[key], item_shape, _join(where, key))
    for key, item in value.items():
        if key in shape.required:
            continue
        known = shape.optional.get(key)
        if known is not None:
            _locate(item, known, _join(where, key))
        elif shape.closed:
            raise Damage(_join(where, key), "not a key this document has")
        else:
            _locate(item, JSON, _join(where, key))


def _check_any(value: Any, shape: AnyOf, where: str) -> None:
    damage: Damage | None = None
    for each in shape.shapes:
        try:
            _locate(value, each, where)
            return
        except Damage as exc:
            damage = damage or exc  # the first (newest) format's complaint is the one to show
    assert damage is not None
    raise damage


_COMPILED: dict[int, Callable[[Any], bool]] = {}  # by id: shapes are module constants


def _compiled(shape: Shape) -> Callable[[Any], bool]:
    """``shape`` as one test of a whole value, made once per shape."""
    test = _COMPILED.get(id(shape))
    if test is None:
        test = _COMPILED[id(shape)] = _compile(shape)
    return test


def _compile(shape: Shape) -> Callable[[Any], bool]:
    if isinstance(shape, Leaf):
        return shape.test
    if isinstance(shape, Obj):
        return _compile_obj(shape)
    if isinstance(shape, AnyOf):
        tests = [_compiled(s) for s in shape.shapes]
        return lambda v: any(t(v) for t in tests)
    if isinstance(shape, Maybe):
        inner = _compiled(shape.shape)
        return lambda v: v is None or inner(v)
    if isinstance(shape, ListOf):
        item = _compiled(shape.item)
        return lambda v: type(v) is list and all(map(item, v))
    values = _compiled(shape.value)
    return lambda v: type(v) is dict and all(map(values, v.values()))


def _compile_obj(shape: Obj) -> Callable[[Any], bool]:
    shapes = {**shape.optional, **shape.required}
    types = {k: t for k, s in shapes.items() if (t := _types(s)) is not None}
    tests = {k: _compiled(s) for k, s in shapes.items() if k not in types}
    rest = None if shape.closed else _json
    required = tuple(shape.required)

    def test(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for key, item in value.items():
            allowed = types.get(key)
            if allowed is not None:
                if type(item) not in allowed:
                    return False
                continue
            known = tests.get(key, rest)
            if known is None or not known(item):
                return False
        return all(key in value for key in required)

    return test


def _types(shape: Shape) -> frozenset[type] | None:
    """The types a value of ``shape`` may have, when its type is all it is checked for."""
    if isinstance(shape, Maybe):
        inner = _types(shape.shape)
        return None if inner is None else inner | {type(None)}
    return shape.types if isinstance(shape, Leaf) else None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def found(value: Any) -> str:
    """``value`` for people: ``a string ('x')``."""
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}
    name = names.get(type(value), "a number")
    shown = repr(value) if not isinstance(value, list | dict) else ""
    return f"{name} ({shown[:40]})" if shown else name


def _number(value: Any) -> bool:
    # bool is an int to Python, not a number to a reader; JSON's 1e999 reads as infinity.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _json(value: Any) -> bool:
    """Any JSON value without infinities or NaN (Python's json reads 1e999, NaN, Infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json(v) for v in value)
    if isinstance(value, dict):
        return all(_json(v) for v in value.values())
    return True


TEXT = Leaf("a string", lambda v: type(v) is str, frozenset({str}))
INT = Leaf("an integer", lambda v: type(v) is int, frozenset({int}))
COUNT = Leaf("a whole number, 1 or more", lambda v: type(v) is int and v >= 1)
POSITIVE = Leaf("a number above 0", lambda v: _number(v) and v > 0)
PASSES = Leaf("a whole number, 0 or more", lambda v: type(v) is int and v >= 0)
NUMBER = Leaf("a finite number", _number)
BOOL = Leaf("true or false", lambda v: type(v) is bool, frozenset({bool}))
# orjson, which reads samples.jsonl, refuses infinities and NaN: a number's type is enough.
PARSED_NUMBER = Leaf("a number", lambda v: type(v) in (int, float), frozenset({int, float}))
JSON = Leaf("a JSON value with finite numbers", _json)


def _histogram(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        release(decode(value))
    except Exception:  # hdrh raises zlib's, binascii's and its own errors on a damaged blob
        return False
    return True


HISTOGRAM = Leaf("an encoded HDR histogram", _histogram)


def one_of(*choices: str) -> Leaf:
    return Leaf(" or ".join(repr(c) for c in choices), lambda v: v in choices)


# --- summary.json ------------------------------------------------------------------------

_DISTRIBUTION = Maybe(
    Obj(
        {key: NUMBER for key in ("n", "min", "max", "mean", "p50", "p95", "p99")},
        {"p90": NUMBER, "p99_9": NUMBER, "stddev": Maybe(NUMBER), "method": TEXT},
    )
)
_METRICS = Obj(
    {"tasks": INT, "ok": INT},
    {
        **{s: INT for s in ("error", "timeout", "rate_limited", "cancelled", "dropped")},
        **{d: _DISTRIBUTION for d in ("latency", "latency_all", "ttft", "latency_intended")},
        **{d: _DISTRIBUTION for d in ("schedule_lag", "wait", "read_delay")},
        "failures": MapOf(Obj({"count": INT}, {"example": TEXT})),
        "models_served": MapOf(INT),
    },
)
_SCOPES = {scope: MapOf(_METRICS) for scope in ("cases", "languages", "tags")}
_SPREAD = MapOf(Obj({"median": NUMBER, "min": NUMBER, "max": NUMBER}, {"n": INT}))


def _summary(cases: bool) -> Obj:
    """summary.json's shape: with each scope's cases (schema 1), or without them (schema 2:
    they are in cases.jsonl, ``CASE_LINE``)."""
    scopes = _SCOPES if cases else {k: v for k, v in _SCOPES.items() if k != "cases"}
    across = {"overall": _SPREAD, "languages": MapOf(_SPREAD)}
    return Obj(
        {
            "runs": ListOf(Obj({"run": INT, "window": NUMBER, "overall": _METRICS}, scopes)),
            "across_runs": Obj(
                {**across, "cases": MapOf(_SPREAD)} if cases else across,
                {"runs": INT, "tags": MapOf(_SPREAD)},
            ),
            "pooled": Obj({"overall": _METRICS, **scopes}, {"window": Maybe(NUMBER)}),
        },
        {
            "schema": INT,
            "warmup_tasks": INT,
            "histograms": MapOf(HISTOGRAM),
            "client": Obj({}, {"headroom": Maybe(Obj({}))}),
            "adaptive": Obj({"history": ListOf(JSON)}),
        },
    )


SUMMARY, SUMMARY_WITHOUT_CASES = _summary(cases=True), _summary(cases=False)
# A line of cases.jsonl (store/cases.py): a case's figures in each run (null where it has
# none) and pooled.
CASE_LINE = Obj({"id": TEXT, "runs": ListOf(Maybe(_METRICS)), "pooled": _METRICS})
