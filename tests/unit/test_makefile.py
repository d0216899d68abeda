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
def test_make_test_runs_more_workers_than_the_two_cores_unless_told(tmp_path: Path) -> None:
    """The parallel phase waits on child processes and sockets most of the time: three
    workers on two cores, TEST_WORKERS=2 for one a core (issue 41: make test in 10 minutes)."""

    def xdist(*extra: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-C", str(ROOT), "test", f"VENV={tmp_path / 'venv'}", *extra],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        (line,) = [line for line in done.stdout.splitlines() if " --dist " in line]
        return line

    assert " -n 3 --dist loadfile " in xdist()
    assert " -n 2 --dist loadfile " in xdist("TEST_WORKERS=2")
