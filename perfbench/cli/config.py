"""The project's settings file: ``perfbench.toml``, or ``[tool.perfbench]`` in ``pyproject.toml``.

Read once, at the edge; the rest of perfbench receives plain mappings. Only the ``[compare]``
table is defined so far::

    [compare]                       # in pyproject.toml: [tool.perfbench.stats.compare]
    alpha = 0.05
    gate = ["p50", "p95", "error_rate", "cost"]
    scopes = ["overall"]            # or "cases", "languages", "all"
    correction = "auto"             # auto | bh | none
    strict = false
    detect = "20%"                  # every gated metric must be able to flag this change
    thresholds = ["p95<2s", "error_rate<1%"]
    max_regression = { p95 = "15%", p99 = "25%" }
    floor = { p50 = "5ms" }
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from perfbench.errors import GateError

# Each key's TOML type, and how to write it (for the error when a value has another type).
_LISTS = {"gate": 'gate = ["p50", "p95"]', "scopes": 'scopes = ["overall"]',
          "thresholds": 'thresholds = ["p95<2s"]'}  # fmt: skip
_TABLES = {"max_regression": 'max_regression = { p95 = "15%" }', "floor": 'floor = { p50 = "5ms" }'}
KNOWN = {"alpha", "correction", "detect", "strict", *_LISTS, *_TABLES}


def find(cwd: Path) -> Path | None:
    """``perfbench.toml`` in ``cwd``, else a ``pyproject.toml`` there that has a perfbench table."""
    own = cwd / "perfbench.toml"
    if own.is_file():
        return own
    project = cwd / "pyproject.toml"
    if project.is_file() and "tool" in _read(project) and "perfbench" in _read(project)["tool"]:
        return project
    return None


def compare_settings(path: Path | None) -> dict[str, Any]:
    """The ``[compare]`` table of a settings file (empty when there is no file)."""
    if path is None:
        return {}
    doc = _read(path)
    if path.name == "pyproject.toml":
        doc = doc.get("tool", {}).get("perfbench", {})
    table = doc.get("compare", {})
    if not isinstance(table, dict):
        raise GateError(f"{path}: [compare] should be a table")
    unknown = sorted(set(table) - KNOWN)
    if unknown:
        raise GateError(
            f"{path}: [compare] has unknown key '{unknown[0]}'; known: {', '.join(sorted(KNOWN))}"
        )
    return {key: _typed(path, key, value) for key, value in table.items()}


def _typed(path: Path, key: str, value: Any) -> Any:
    """The value if it has its key's type (a lone string stands for a list of one); else a
    GateError saying how to write it. TOML's types are strict, so "no" is not false."""
    if key in _LISTS:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and all(isinstance(v, str) for v in items):
            return items
        expected = f"a list of strings, as in {_LISTS[key]}"
    elif key in _TABLES:
        if isinstance(value, dict):
            return value
        expected = f"a table, as in {_TABLES[key]}"
    elif key == "strict":
        if isinstance(value, bool):
            return value
        expected = "true or false (no quotes)"
    elif key == "alpha":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        expected = "a number, as in alpha = 0.05"
    else:  # correction, detect: their values are checked with the rules
        if isinstance(value, str):
            return value
        expected = f'a string, as in {key} = "{"20%" if key == "detect" else "auto"}"'
    raise GateError(f"{path}: [compare] {key} should be {expected}; it is {value!r}")


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateError(f"{path}: no such settings file") from None
    except tomllib.TOMLDecodeError as exc:
        raise GateError(f"{path}: not valid TOML: {exc}") from None
