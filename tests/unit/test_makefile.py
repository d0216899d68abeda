"""`make demo` installs what the demo needs, perfbench and its runtime dependencies, and
neither Ray nor the dev tools (they took 3 of its 4 minutes); `make test` installs the rest.
Read from `make -n` (a dry run: nothing is installed) into a virtual environment not made."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _installs(target: str, venv: Path) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [line for line in done.stdout.splitlines() if "pip install" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_demo_installs_neither_ray_nor_the_dev_tools(tmp_path: Path) -> None:
    demo = _installs("demo", tmp_path / "venv")
    assert any(line.endswith("install --quiet -e .") for line in demo), demo
    assert not any("dev" in line or "ray" in line for line in demo), demo
    test = _installs("test", tmp_path / "venv")
    assert any("-e '.[dev,ray" in line for line in test), test


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_test_takes_its_number_of_workers(tmp_path: Path) -> None:
    """The parallel phase: a worker a core unless TEST_WORKERS says otherwise (three may be
    faster, as the tests wait on child processes and sockets; issue 41)."""

    def xdist(*extra: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-C", str(ROOT), "test", f"VENV={tmp_path / 'venv'}", *extra],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        (line,) = [line for line in done.stdout.splitlines() if " --dist " in line]
        return line

    assert " -n 2 --dist loadfile " in xdist()
    assert " -n 3 --dist loadfile " in xdist("TEST_WORKERS=3")
