"""The package's structure, held to docs/architecture.md. The layer order, the arrows the design
forbids and the ban on import circles are import-linter contracts in pyproject.toml
(``[tool.importlinter]``, run by ``make lint``); here they run once more, and once on a copy of
the package with an upward import, a forbidden arrow and a circle put in, to show they can fail.
Import-linter reads every import: top level, inside functions and under TYPE_CHECKING."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "perfbench"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
# A contract's line in lint-imports' report: "<name> KEPT" or "<name> BROKEN (2 ignored imports)"
_VERDICT = re.compile(r"^(.+) (KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$", re.M)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root``, with the contracts of its pyproject.toml."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_package_keeps_its_import_contracts() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {m[1]: m[2] for m in _VERDICT.finditer(done.stdout)}
    assert len(verdicts) == 5 and set(verdicts.values()) == {"KEPT"}, done.stdout


def test_the_contracts_fail_on_an_upward_import_a_forbidden_arrow_and_a_circle(
    tmp_path: Path,
) -> None:
    shutil.copytree(PACKAGE, tmp_path / "perfbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    _append(tmp_path, "http/urls.py", "from perfbench.stats import tokens")  # up
    _append(tmp_path, "engine/limiter.py", "from perfbench.report import console")  # renders
    # A circle for type hints only: the spec's record naming the registry that builds from it.
    _append(
        tmp_path,
        "targets/target_spec.py",
        "if TYPE_CHECKING:\n    from perfbench.targets import registry",
    )
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = {m[1] for m in _VERDICT.finditer(done.stdout) if m[2] == "BROKEN"}
    assert broken == {
        "perfbench reads as the data flow: each layer imports only the layers below it",
        "The engine computes, the report renders",
        "No modules import each other, not even for type hints",
    }, done.stdout
    assert "perfbench.http.urls -> perfbench.stats.tokens" in done.stdout


def _append(root: Path, module: str, code: str) -> None:
    path = root / "perfbench" / module
    text = path.read_text(encoding="utf-8")
    if "TYPE_CHECKING" in code and "import TYPE_CHECKING" not in text:
        code = "from typing import TYPE_CHECKING\n" + code
    path.write_text(text + "\n" + code + "\n", encoding="utf-8")


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
