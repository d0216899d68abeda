"""YAML documents that remember where each value came from, so that validation errors can name
the file, the line and the field. Used by case suites and mock profiles."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from perfbench.errors import Problem

Loc = tuple[str | int, ...]


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
    """Parse one YAML file. Syntax errors and duplicate keys become ``Problem``s (raised by the
    caller's error type through ``YamlProblem``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlProblem(Problem(path, None, "", f"is not UTF-8 text ({exc.reason})")) from exc
    except OSError as exc:
        raise YamlProblem(Problem(path, None, "", f"cannot be read: {exc.strerror}")) from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise YamlProblem(Problem(path, *_where(exc))) from exc
    doc = Located(path, None)
    if node is not None:
        doc.lines[()] = node.start_mark.line + 1
        doc.data = _build(node, (), doc)
    return doc


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


def _build(node: yaml.Node, loc: Loc, doc: Located) -> Any:
    if isinstance(node, yaml.MappingNode):
        return _mapping(node, loc, doc)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            doc.lines[(*loc, i)] = item.start_mark.line + 1
            items.append(_build(item, (*loc, i), doc))
        return items
    return _scalar(node, loc, doc)


def _mapping(node: yaml.MappingNode, loc: Loc, doc: Located) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    seen: dict[Any, int] = {}
    merged: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + 1
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` (YAML merge key)
            merged.update(_merge_source(value_node, loc, doc))
            continue
        key = _scalar(key_node, loc, doc)
        child = (*loc, key)
        if key in seen:
            msg = f"appears twice in one mapping (first at line {seen[key]})"
            raise YamlProblem(Problem(doc.path, line, dotted(child), msg))
        seen[key] = line
        doc.lines[child] = line
        out[key] = _build(value_node, child, doc)
    return {**merged, **out}  # keys written out win over merged ones, as in YAML


def _merge_source(node: yaml.Node, loc: Loc, doc: Located) -> dict[Any, Any]:
    sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
    merged: dict[Any, Any] = {}
    for source in reversed(sources):  # earlier sources take precedence
        value = _build(source, loc, doc)
        if not isinstance(value, dict):
            line = source.start_mark.line + 1
            raise YamlProblem(Problem(doc.path, line, dotted(loc), "'<<' needs a mapping"))
        merged.update(value)
    return merged


def _scalar(node: yaml.Node, loc: Loc, doc: Located) -> Any:
    # PyYAML's own constructor resolves `1`, `true`, `0.5`, `null` to their types.
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        line = node.start_mark.line + 1
        msg = f"cannot read value with tag {node.tag!r} (only plain YAML is allowed)"
        raise YamlProblem(Problem(doc.path, line, dotted(loc), msg)) from exc
    finally:
        loader.dispose()


def dotted(loc: Loc) -> str:
    """``("cases", 2, "tools", 0, "name")`` → ``cases[2].tools[0].name``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
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
        return f"unknown field '{name}'{hint}"
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
