"""YAML documents that remember where each value came from, so that validation errors can name
the file, the line and the field. Used by case suites, mock profiles and price overrides.

A document holds what JSON holds, because JSON is what perfbench makes of it (request bodies,
tool results, the suite digest): text, numbers, true/false, null, lists, and mappings whose
keys are text. So the loader keeps dates and keys as the text written, joins surrogate pairs
written as escapes, and refuses, each as a located ``Problem``:

- other tags (``!!binary``, ``!custom``) and text a tag does not fit (``!!int abc``);
- integers beyond 64 bits (``INT_RANGE``), lone surrogates, control characters, bytes that
  are not UTF-8;
- nesting deeper than ``MAX_DEPTH``, an alias inside its own anchor, and aliases that would
  copy more than ``MAX_ALIAS_NODES`` values, so that no file, however short, can exhaust the
  stack or the memory (the "billion laughs" bomb is 300 bytes of nested aliases).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from perfbench.errors import Problem

Loc = tuple[str | int, ...]

# Lists and mappings nested deeper are refused. Case files nest fewer than ten levels; the
# loader recurses once per level, and Python stops near a thousand frames.
MAX_DEPTH = 100
# The most values the aliases (*name) of one file may copy: about a second and 100 MB to
# build. Sharing tools through anchors copies thousands; a bomb of nested aliases, billions.
MAX_ALIAS_NODES = 200_000
# Integers must fit in 64 bits, signed: wider ones crash JSON encoders (orjson) and servers.
INT_RANGE = (-(2**63), 2**63 - 1)

_TAG = "tag:yaml.org,2002:"
_INT, _TIMESTAMP, _VALUE, _MERGE = (f"{_TAG}{t}" for t in ("int", "timestamp", "value", "merge"))
# Scalar tags whose PyYAML constructor gives a JSON value.
_BUILT = {f"{_TAG}{t}" for t in ("null", "bool", "int", "float", "str")}
# Scalar tags kept as the text written: JSON has no dates (and `2024-13-45`, which looks like
# one, is just text), and `=` resolves to !!value, which PyYAML cannot construct.
_AS_TEXT = {_TIMESTAMP, _VALUE}
# What PyYAML's constructors raise on text that a tag does not fit: `!!int abc` (int()),
# `!!bool maybe` (a dict lookup), `!!float x`.
_UNFIT = (yaml.YAMLError, ValueError, LookupError, AttributeError, TypeError)
_SURROGATE = re.compile("[\ud800-\udfff]")
_DECIMAL = re.compile(r"[-+]?[0-9][0-9_]*")
_SHOWN = 12  # levels of a field named in a nesting error; the rest is "…"


@dataclass
class Located:
    """A parsed YAML document plus the 1-based line of every mapping key and sequence item."""

    path: Path
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)

    def line_of(self, loc: Loc) -> int | None:
        """The line of ``loc`` or of its nearest ancestor that has one."""
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)


def load(path: Path) -> Located:
    """Parse one YAML file. Every problem (syntax, encoding, duplicate keys, unreadable or
    explosive values) is raised as a ``YamlProblem`` for the caller to wrap in its own error."""
    text = _read(path)
    try:
        loader = _Loader(text, path)  # checks every character first
        node = _composed_in_c(text)
        if node is _SLOW:
            node = loader.get_single_node()
    except yaml.reader.ReaderError as exc:
        raise YamlProblem(_unprintable(exc, text, path)) from exc
    except yaml.MarkedYAMLError as exc:
        raise YamlProblem(Problem(path, *_where(exc))) from exc
    try:
        doc = Located(path, None)
        if node is not None:
            doc.lines[()] = node.start_mark.line + 1
            doc.data = _Builder(doc, loader).build(node, ())
        return doc
    finally:
        loader.dispose()


_SLOW = yaml.Node("", "", None, None)  # marks a file the C composer left to PyYAML's


def _composed_in_c(text: str) -> yaml.Node | None:
    """The document composed by libyaml, ~8x faster than PyYAML's composer (10,000 cases: a
    second, not eight), when that is safe: a file without anchors and aliases (no ``&`` or
    ``*`` anywhere) cannot be an alias bomb, and its depth is checked here once composed.
    ``_SLOW`` when PyYAML's guarded composer must do it: anchors, too deep, or any error,
    which PyYAML's composer then reports in the words (and at the line) users know."""
    if "&" in text or "*" in text or not yaml.__with_libyaml__:
        return _SLOW
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return _SLOW
    return _SLOW if node is not None and _too_deep(node) else node


def _too_deep(root: yaml.Node) -> bool:
    """Whether lists and mappings nest more than ``MAX_DEPTH`` deep (walked without recursion,
    as the builder that follows recurses)."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((child, depth + 1) for pair in node.value for child in pair)
        else:
            continue
        if depth >= MAX_DEPTH - 1:  # a level short: PyYAML's composer then says how deep
            return True
    return False


def _read(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise YamlProblem(Problem(path, None, "", f"cannot be read: {exc.strerror}")) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start]
        msg = f"is not UTF-8 text: byte 0x{bad:02X} cannot be read ({exc.reason})"
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            msg = "is UTF-16 text"
        raise YamlProblem(Problem(path, line, "", f"{msg}; save the file as UTF-8")) from exc


def _unprintable(exc: yaml.reader.ReaderError, text: str, path: Path) -> Problem:
    """A character YAML does not allow in a file (control characters, U+FFFE, U+FFFF)."""
    # Counted as PyYAML counts lines; "x" so that a break just before the character counts.
    line = len((text[: exc.position] + "x").splitlines())
    code = exc.character if isinstance(exc.character, int) else ord(exc.character)
    msg = (
        f"contains the character U+{code:04X}, which YAML does not allow in a file; delete it, "
        f'or write it as the escape "\\u{code:04X}" inside double quotes'
    )
    return Problem(path, line, "", msg)


def _where(exc: yaml.MarkedYAMLError) -> tuple[int | None, str, str]:
    """Line, field and message of a YAML syntax error. The context mark (where the unclosed
    quote or bracket opened) is where the mistake is; the problem mark is often the file's end."""
    problem, context = exc.problem_mark, exc.context_mark
    mark = context or problem
    line = mark.line + 1 if mark is not None else None
    message = f"invalid YAML: {exc.problem}"
    if context is not None and exc.context:
        message += f" ({exc.context} at line {context.line + 1}"
        if problem is not None and problem.line != context.line:
            message += f", noticed at line {problem.line + 1}"
        message += ")"
    return line, "", message


class YamlProblem(Exception):
    """Internal carrier of a single YAML-level problem; callers wrap it in their own error."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing while it composes what would exhaust the stack or the
    memory once built. Composing is cheap even for a bomb (an alias shares its anchor's node);
    building copies every alias, so the copies are counted here, before any is made."""

    def __init__(self, text: str, path: Path) -> None:
        super().__init__(text)
        self.path = path
        self.fields: list[str | int | None] = []  # where the node being composed sits
        self.anchors_open: list[str | None] = []  # anchors of the nodes being composed
        self.extent: dict[int, tuple[int, int]] = {}  # id(node) → (values, levels) as built
        self.copied = 0  # values that aliases copy, so far

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.fields.append(_field(parent, index))
        try:
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # stub
            if isinstance(event, yaml.AliasEvent):
                return self._alias(event, parent, index)
            return self._node(event, parent, index)
        finally:
            self.fields.pop()

    def _node(self, event: yaml.Event, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.depth > MAX_DEPTH:
            raise self._problem(event, f"nests lists and mappings more than {MAX_DEPTH} deep")
        self.anchors_open.append(getattr(event, "anchor", None))
        try:
            node = super().compose_node(parent, index)
        finally:
            self.anchors_open.pop()
        assert node is not None  # only an empty document composes to None
        self.extent[id(node)] = _extent(node, self.extent)
        return node

    def _alias(self, event: yaml.AliasEvent, parent: yaml.Node | None, index: Any) -> yaml.Node:
        name = event.anchor
        if name in self.anchors_open:
            msg = (
                f"*{name} is used inside &{name}, the value it names, which would then contain "
                "itself without end; copy the part you need instead"
            )
            raise self._problem(event, msg)
        node = super().compose_node(parent, index)  # an undefined alias is PyYAML's error
        assert node is not None
        values, levels = self.extent[id(node)]
        if self.depth - 1 + levels > MAX_DEPTH:
            raise self._problem(
                event, f"*{name} nests lists and mappings more than {MAX_DEPTH} deep"
            )
        self.copied += values
        if self.copied > MAX_ALIAS_NODES:
            msg = (
                f"aliases copy more than {MAX_ALIAS_NODES:,} values in this file (*{name} alone "
                f"copies {values:,}); nest fewer aliases, or split the file"
            )
            raise self._problem(event, msg)
        return node

    @property
    def depth(self) -> int:
        return len(self.fields)

    def _problem(self, event: yaml.Event, message: str) -> YamlProblem:
        where = dotted(tuple(f for f in self.fields[:_SHOWN] if f is not None))
        where += "…" if len(self.fields) > _SHOWN else ""
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        return YamlProblem(Problem(self.path, line, where, message))


def _field(parent: yaml.Node | None, index: Any) -> str | int | None:
    """The field a node being composed fills: PyYAML passes a sequence item's position, a
    mapping value's key node, and None for a key or the document itself."""
    if isinstance(index, yaml.ScalarNode):
        return str(index.value)
    return index if isinstance(index, int) else None


def _extent(node: yaml.Node, known: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """How many values ``node`` builds into and how many levels deep, aliases copied out."""
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        return 1, 1
    inner = [known[id(child)] for child in children]
    return 1 + sum(v for v, _ in inner), 1 + max((levels for _, levels in inner), default=0)


@dataclass
class _Builder:
    """Builds a composed document into JSON values, noting each key's and item's line."""

    doc: Located
    loader: _Loader

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, loc)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.doc.lines[(*loc, i)] = item.start_mark.line + 1
                items.append(self.build(item, (*loc, i)))
            return items
        return self._scalar(node, loc)

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, int] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE:  # `<<: *anchor` (YAML merge key)
                merged.update(self._merge_source(value_node, loc))
                continue
            key = self._key(key_node, loc)
            child = (*loc, key)
            if key in seen:
                msg = f"appears twice in one mapping (first at line {seen[key]})"
                raise self._problem(key_node, child, msg)
            seen[key] = line
            self.doc.lines[child] = line
            out[key] = self.build(value_node, child)
        return {**merged, **out}  # keys written out win over merged ones, as in YAML

    def _merge_source(self, node: yaml.Node, loc: Loc) -> dict[str, Any]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in reversed(sources):  # earlier sources take precedence
            value = self.build(source, loc)
            if not isinstance(value, dict):
                raise self._problem(source, loc, "'<<' needs a mapping")
            merged.update(value)
        return merged

    def _key(self, node: yaml.Node, loc: Loc) -> str:
        """A key as the text written, as JSON's keys are text: `1:`, `no:` and `2024-01-01:`
        are the keys "1", "no" and "2024-01-01"."""
        if not isinstance(node, yaml.ScalarNode):
            msg = "has a list or mapping as a key (`? …`); keys must be text"
            raise self._problem(node, loc, msg)
        if node.tag not in _BUILT | _AS_TEXT:
            raise self._problem(node, loc, _unsupported(node.tag))
        return self._text(node.value, node, loc)

    def _scalar(self, node: yaml.Node, loc: Loc) -> Any:
        if node.tag in _AS_TEXT:
            return self._text(node.value, node, loc)
        if node.tag not in _BUILT:
            raise self._problem(node, loc, _unsupported(node.tag))
        try:
            value = self.loader.yaml_constructors[node.tag](self.loader, node)
        except _UNFIT as exc:
            raise self._problem(node, loc, _unfit(node)) from exc
        if isinstance(value, str):
            return self._text(value, node, loc)
        if type(value) is int and not INT_RANGE[0] <= value <= INT_RANGE[1]:
            raise self._problem(node, loc, _out_of_range(node.value))
        return value

    def _text(self, value: str, node: yaml.Node, loc: Loc) -> str:
        """``value`` with escaped surrogate pairs ("\\ud83d\\ude00") joined into the character
        they stand for; a lone surrogate, which no encoder can write, is refused."""
        if not _SURROGATE.search(value):
            return value
        units = value.encode("utf-16-le", "surrogatepass")
        try:
            return units.decode("utf-16-le")
        except UnicodeDecodeError as exc:
            code = int.from_bytes(units[exc.start : exc.start + 2], "little")
            msg = (
                f"contains \\u{code:04x}, half of a UTF-16 surrogate pair without its other half, "
                "which is not text; write the character itself"
            )
            raise self._problem(node, loc, msg) from exc

    def _problem(self, node: yaml.Node, loc: Loc, message: str) -> YamlProblem:
        line = node.start_mark.line + 1
        return YamlProblem(Problem(self.doc.path, line, dotted(loc), message))


def _short(tag: str) -> str:
    return tag.replace(_TAG, "!!", 1) if tag.startswith(_TAG) else tag


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else f"{text[:width]}…"


def _unsupported(tag: str) -> str:
    return (
        f"has the tag {_short(tag)}, which perfbench does not read (values are text, numbers, "
        "true/false, null, lists and mappings); remove the tag, and quote the value to keep it "
        "as text"
    )


def _unfit(node: yaml.Node) -> str:
    if node.tag == _INT and _DECIMAL.fullmatch(node.value):  # past Python's 4300-digit limit
        return _out_of_range(node.value)
    return (
        f"cannot be read as {_short(node.tag)}: {_clip(node.value)!r} is no such value; write "
        "one, or to keep the text, drop the tag and quote the text"
    )


def _out_of_range(text: str) -> str:
    low, high = INT_RANGE
    return (
        f"{_clip(text.strip())} is out of range: integers must fit in 64 bits ({low} to "
        f"{high}), as JSON clients and servers read them; quote the number to keep it as text"
    )


def dotted(loc: Loc) -> str:
    """``("cases", 2, "tools", 0, "name")`` → ``cases[2].tools[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        # A key with a line break or another unprintable character is shown quoted, escaped:
        # a problem stays on one `file:line: field: message` line.
        name = part if part.isprintable() else json.dumps(part)
        out += f".{name}" if out else name
    return out


def problems(
    exc: ValidationError, doc: Located, prefix: Loc = (), model: type[BaseModel] | None = None
) -> list[Problem]:
    """Turn a pydantic error into located problems. ``prefix`` is where the validated object sits
    in the document; ``model`` lets an unknown field suggest the nearest known one."""
    out = []
    for err in exc.errors(include_url=False):
        loc: Loc = (*prefix, *(p for p in err["loc"] if isinstance(p, str | int)))
        out.append(Problem(doc.path, doc.line_of(loc), dotted(loc), _explain(err, model)))
    return out


def _explain(err: Any, model: type[BaseModel] | None) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        name = str(err["loc"][-1])
        hint = _suggest(name, err["loc"], model)
        return f"unknown field {name!r}{hint}"  # repr: a key may hold a line break
    if kind == "missing":
        return "is required but missing"
    got = err.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    msg = str(err["msg"]).removeprefix("Value error, ")  # our own validators' messages
    return f"{msg[0].lower()}{msg[1:]}{shown}"


def _suggest(name: str, loc: tuple[Any, ...], model: type[BaseModel] | None) -> str:
    known = _fields_at(model, loc[:-1]) if model is not None else []
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; expected one of: {', '.join(known)}" if known else ""


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the (nested) model that ``loc`` points into, as far as it can be
    followed through plain model-typed and list-of-model fields."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = current.model_fields.get(part) if hasattr(current, "model_fields") else None
        if info is None:
            return []
        current = _inner_model(info.annotation)
        if current is None:
            return []
    return [f.alias or n for n, f in current.model_fields.items()]


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None
