"""The package's structure, held to docs/architecture.md: no import cycle, and none of the
arrows the design forbids. Imports are read from the source: for arrows, top level, inside
functions and under TYPE_CHECKING alike, so a lazy import cannot hide one; for cycles, the
imports that run (a TYPE_CHECKING import is an annotation, not a dependency at import time)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "perfbench"

# part -> what it may never import (module prefixes under perfbench.)
NEVER: dict[str, tuple[str, ...]] = {
    "stats": ("engine", "targets", "http", "cli", "api", "spec", "calibrate", "report",
              "events", "mock", "store", "export"),
    "report": ("engine", "targets", "http", "cli", "api", "calibrate", "events", "mock"),
    "targets": ("engine", "cli", "api", "calibrate", "store", "report", "events"),
    "http": ("targets", "engine", "cli", "api", "mock", "store", "stats", "report"),
    "mock": ("targets", "engine", "cli", "api", "store", "report", "http.failures",
             "http.h1_backend", "http.httpx_backend", "http.redact"),
    "suite": ("engine", "targets", "http", "store", "stats", "report", "cli"),
    "load": ("engine", "targets", "http", "store", "report", "cli"),
    "store": ("engine", "targets", "http", "report", "cli", "api", "calibrate"),
    "engine": ("cli", "api", "calibrate", "report.console", "report.release"),
    "spec": ("engine", "cli", "api", "calibrate"),
    "sample": ("engine", "targets", "http", "store", "stats", "report", "cli", "suite"),
    "task": ("engine", "targets", "http", "store", "stats", "report", "cli"),
    "proxy": ("engine", "cli", "api", "store", "report", "events", "mock",
              "targets.command", "targets.registry"),
}  # fmt: skip


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def _imports(path: Path, *, typing_only: bool = True) -> Iterator[tuple[int, str]]:
    """(line, imported name) for every import; ``from a import b`` gives ``a.b`` (a module,
    or a name in module ``a``)."""
    here = _module(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if typing_only else _under_type_checking(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def _under_type_checking(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            found.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return found


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The package module an imported name belongs to (``perfbench.store.read_json`` →
    ``perfbench.store``), or None outside the package."""
    while name.startswith("perfbench"):
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for _, name in _imports(path, typing_only=False):
            target = _resolve(name)
            if target is not None and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _part(module: str) -> str | None:
    name = module.removeprefix("perfbench.")
    return next((p for p in NEVER if name == p or name.startswith(p + ".")), None)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    name = module.removeprefix("perfbench.")
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_package_has_no_import_cycle() -> None:
    assert _cycles(_edges()) == []


def test_no_import_crosses_an_arrow_the_design_forbids() -> None:
    crossings = []
    for module, path in sorted(MODULES.items()):
        part = _part(module)
        if part is None:
            continue
        for line, name in _imports(path):
            target = _resolve(name)
            if target is not None and _within(target, NEVER[part]):
                crossings.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} -> {target}")
    assert sorted(set(crossings)) == []


def test_the_checker_sees_a_forbidden_arrow_and_a_cycle(tmp_path: Path) -> None:
    """The checks above can fail: a module of stats importing the engine is a crossing, and
    two modules importing each other are a cycle."""
    assert _within("perfbench.engine.session", NEVER["stats"])
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from perfbench.engine import session\n")
    assert "perfbench.engine.session" in {n for _, n in _imports_of(source)}


def _imports_of(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


@pytest.mark.parametrize("folder", ["cli"])
def test_command_modules_stay_small(folder: str) -> None:
    """cli/ holds no module over 400 lines and no command body over 40 (its options are
    declared once, in cli/options.py; its logic lives in the library)."""
    long_modules, long_bodies = [], []
    for path in sorted((PACKAGE / folder).glob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 400:
            long_modules.append(f"{path.name}: {len(lines)} lines")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef) and any(
                _is_command(d) for d in node.decorator_list
            ):
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    first = node.body[1] if len(node.body) > 1 else first  # skip the docstring
                body = (node.end_lineno or 0) - first.lineno + 1
                if body > 40:
                    long_bodies.append(f"{path.name}:{node.lineno} {node.name}: {body} lines")
    assert long_modules == [] and long_bodies == []


def _is_command(decorator: ast.expr) -> bool:
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(call, ast.Attribute) and call.attr in ("command", "callback")


COMMAND_LINES = 80  # a command function, signature and docstring included


def _long_commands(source: str, limit: int = COMMAND_LINES) -> list[str]:
    """Each typer command function (``@app.command``/``.callback``) over ``limit`` lines,
    from its ``def`` to its last line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(_is_command(d) for d in node.decorator_list):
            lines = (node.end_lineno or 0) - node.lineno + 1
            if lines > limit:
                found.append(f"{node.name}: {lines} lines")
    return found


def test_command_functions_stay_under_80_lines() -> None:
    """Options are declared once, as module-level aliases (``cli/shape.py`` the load shape,
    ``cli/options.py`` the shared groups, a command's own beside it), and the logic lives in
    ``perfbench.api``: a command function reads as its flags and a few calls."""
    long = [
        f"{path.name}:{name}"
        for path in sorted((PACKAGE / "cli").glob("*.py"))
        for name in _long_commands(path.read_text(encoding="utf-8"))
    ]
    assert long == []


def test_the_length_check_sees_a_long_command() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(COMMAND_LINES))
    source = (
        f"@app.command()\ndef long() -> None:\n{body}\n\n"
        "@app.callback()\ndef ok() -> None:\n    pass\n"
    )
    assert _long_commands(source) == [f"long: {COMMAND_LINES + 1} lines"]
    assert _long_commands(source.replace("@app.command()\n", "")) == []


def test_the_load_shape_s_concurrency_is_declared_once() -> None:
    """run's and ab's --concurrency are one declaration (cli/shape.py); sweep's takes levels."""
    import inspect

    from perfbench.cli import ab, run, shape

    for command in (run.run, ab.ab):
        params = inspect.signature(command, eval_str=True).parameters
        assert params["concurrency"].annotation is shape.ConcurrencyOpt, command.__name__
    declared = [
        path.name
        for path in sorted((PACKAGE / "cli").glob("*.py"))
        if '"--concurrency", "-c"' in path.read_text(encoding="utf-8")
    ]
    assert declared == ["shape.py", "sweep.py"]
