"""The distribution's own name (issue 22 item 8): `perfbench` on PyPI is an unrelated project, so
every install line must name `perfbench-llm` (or a path or URL), never the bare `perfbench`."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from perfbench.version import DISTRIBUTION, __version__

ROOT = Path(__file__).resolve().parents[2]
# `pip install` followed by what it installs, up to the end of the shell word.
_INSTALL = re.compile(
    r"pip install\s+(?:--?[\w-]+\s+)*['\"]?([\w.\-\[\],/$@:+ ]*?)['\"]?(?:\s|`|$)"
)


def _documents() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "action.yml",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "perfbench").rglob("*.py")),
    ]


def test_pyproject_names_the_distribution() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION == "perfbench-llm"
    assert project["scripts"]["perfbench"].startswith("perfbench.")


def test_the_installed_version_is_found_under_that_name() -> None:
    assert version(DISTRIBUTION) == __version__ != "0.0.0+unknown"


def test_no_install_line_names_the_other_project() -> None:
    wrong = []
    for path in _documents():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _INSTALL.finditer(line):
                target = match.group(1).strip()
                if re.fullmatch(r"perfbench(\[[\w,]+\])?", target):
                    wrong.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not wrong, "install lines that get PyPI's unrelated `perfbench`:\n" + "\n".join(wrong)


def test_the_guard_would_catch_a_bare_name() -> None:
    assert _INSTALL.search("run `pip install 'perfbench[parquet]'` first").group(1) == (
        "perfbench[parquet]"
    )
    assert _INSTALL.search("pip install perfbench").group(1) == "perfbench"
