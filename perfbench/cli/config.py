"""The project's settings file: ``perfbench.toml``, or ``[tool.perfbench]`` in ``pyproject.toml``.

Read once, at the edge; the rest of perfbench receives plain mappings. Two tables: ``[run]``
holds the load's ramping stages, ``run --stages``' (k6's ``stages``)::

    [[run.stages]]                  # in pyproject.toml: [[tool.perfbench.run.stages]]
    duration = "30s"                # ms, s, m, h; a bare number is seconds
    target = 8                      # tasks in flight; or a rate, "5/s" (an open loop)

    [run]                           # or the --stages text
    stages = "30s:8,60s:32,30s:0"

and ``[compare]`` the gate's settings::

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

import re
import tomllib
from pathlib import Path
from typing import Any

from perfbench.errors import GateError
from perfbench.load import stages as ramping

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
    table = _table(path, "compare", KNOWN)
    return {key: _typed(path, key, value) for key, value in table.items()}


def run_stages(path: Path | None) -> str | None:
    """``[run] stages`` of a settings file, as ``--stages`` takes them, checked (None: none).
    A bad stage is a GateError naming the file, the key and the stage."""
    if path is None:
        return None
    value = _table(path, "run", {"stages"}).get("stages")
    if value is None:
        return None
    if isinstance(value, str):
        text = value
    elif isinstance(value, list) and value:
        text = ",".join(_stage(path, n, stage) for n, stage in enumerate(value, 1))
    else:
        raise GateError(f"{path}: [run] stages should be {_STAGES}; it is {value!r}")
    try:  # the checks --stages makes, said of the file
        ramping.parse_rates(text) or ramping.parse(text)
    except GateError as exc:
        said = str(exc).removeprefix("--stages: ")
        raise GateError(f"{path}: [run] stages: {said}") from None
    return text


_STAGES = 'a list of [[run.stages]] tables (duration = "30s", target = 8) or "30s:8,60s:32"'
_DURATION = re.compile(r"^\d+(?:\.\d+)?(?:ms|s|m|h)?$")
_RATE = re.compile(r"^\d+(?:\.\d+)?/s$")


def _stage(path: Path, n: int, stage: Any) -> str:
    """One k6 stage, ``{duration = "30s", target = 8}``, as --stages' ``30s:8``."""
    where = f"{path}: [run] stages #{n}"
    if not isinstance(stage, dict) or set(stage) != {"duration", "target"}:
        raise GateError(f"{where} should be a table of duration and target, as in "
                        f'{{ duration = "30s", target = 8 }}; it is {stage!r}')  # fmt: skip
    duration, target = stage["duration"], stage["target"]
    if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
        duration = f"{duration:g}s"
    if not isinstance(duration, str) or not _DURATION.match(duration.strip()):
        raise GateError(f'{where}: duration should be a time, as in "30s", "500ms", "2m" or '
                        f"30 (seconds); it is {stage['duration']!r}")  # fmt: skip
    if isinstance(target, int) and not isinstance(target, bool) and target >= 0:
        return f"{duration.strip()}:{target}"
    if isinstance(target, str) and _RATE.match(target.strip()):
        return f"{duration.strip()}:{target.strip()}"
    raise GateError(f'{where}: target should be the tasks in flight (8) or a rate ("5/s"); '
                    f"it is {target!r}")  # fmt: skip


def _table(path: Path, name: str, known: set[str]) -> dict[str, Any]:
    """The ``[name]`` table of a settings file (``[tool.perfbench.name]`` in pyproject.toml),
    empty when absent; a key it does not know is an error, not ignored."""
    doc = _read(path)
    if path.name == "pyproject.toml":
        doc = doc.get("tool", {}).get("perfbench", {})
    table = doc.get(name, {})
    if not isinstance(table, dict):
        raise GateError(f"{path}: [{name}] should be a table")
    unknown = sorted(set(table) - known)
    if unknown:
        raise GateError(
            f"{path}: [{name}] has unknown key '{unknown[0]}'; known: {', '.join(sorted(known))}"
        )
    return table


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
