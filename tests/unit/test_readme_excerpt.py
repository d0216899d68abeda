"""The output excerpt on the README's first screen is what `make demo` prints today: each of
its lines, numbers aside, is a line of the short screen a run of the demo suite prints on the
default mock profile, 5 runs, at 100 columns (run under virtual time here: the same cases,
the same profile, so the same rows, warnings and headline), and only case rows are left out.
A change of what `run` prints fails here until the README shows it; before, the excerpt
left out the table's title and the warning every demo run prints."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from perfbench.cli.output import print_result
from perfbench.engine.session import Session
from perfbench.mock.profile import load_profile
from perfbench.spec import Plan, RunSpec
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent

ROOT = Path(__file__).resolve().parents[2]


def _shape(line: str) -> str:
    """A line without its figures, run directory and target: its wording and layout."""
    line = re.sub(r"runs/\d{8}T\d{6}Z_\S+", "RUN_DIR", line)
    line = re.sub(r"^mock\S*:\S+ · ", "TARGET · ", line)
    line = re.sub(r"─+", "─", line)  # a rule as wide as the table's figures
    line = re.sub(r"\$?\d[\d,.]*", "#", line)
    # a range's units follow its figures: "(868.8 ms–1.01 s)" on one machine, "(#–# ms)" here
    line = re.sub(r"\(#(?: m?s)?–# m?s\)", "(RANGE)", line)
    return " ".join(line.split())


def _excerpt() -> list[str]:
    first = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:60])
    return first.split("```text\n", 1)[1].split("```", 1)[0].splitlines()


@pytest.mark.anyio
async def test_the_readmes_output_excerpt_is_what_a_demo_run_prints(
    example_suite: Suite, tmp_path: Path
) -> None:
    spec = RunSpec(plan=Plan(runs=5), out=str(tmp_path))
    agent = MockAgent(load_profile("default"))
    result = await Session(spec, suite=example_suite, target=agent).run()
    assert result.run_dir is not None
    screen = Console(width=100, record=True, color_system=None, file=io.StringIO())
    run_dir = Path("runs") / result.run_dir.name  # where `make demo` writes it
    print_result(result.summary, result.meta, screen, run_dir=run_dir)
    printed = [_shape(line) for line in screen.export_text().splitlines()]
    excerpt = [_shape(line) for line in _excerpt() if line.strip() != "…"]
    assert len(excerpt) >= 10
    assert [line for line in excerpt if line not in printed] == [], "\n".join(printed)
    # in the order printed, the headline last
    where = [printed.index(line) for line in excerpt]
    assert where == sorted(where) and excerpt[-1] == printed[-1]  # in order, the headline last
    # Only case rows are left out ("…"): the title, the warnings every demo run prints (5 tasks
    # a case) and the whole headline are shown.
    cases = tuple(f"{case.id} " for case in example_suite.cases)
    left_out = [line for line in printed if line not in excerpt and not line.startswith(cases)]
    assert left_out == []
