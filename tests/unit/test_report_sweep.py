"""A sweep's report is rendered from the result the engine returns: ``sweep_md.render`` is pure
(a result in, Markdown out, nothing read or written), ``report.sweep.write`` is the edge that
writes sweep.md and the chart, and says how to recover when it cannot."""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Any

import pytest

from perfbench.engine.results import SweepResult
from perfbench.errors import StoreError
from perfbench.report import sweep as sweep_report
from perfbench.report.sweep_md import markdown, render
from perfbench.spec import Plan, SweepPlan
from perfbench.stats.knee import Level, StopRule, analyse, stop


def _result(path: Path, *, rates: bool = False) -> SweepResult:
    levels = [
        Level(n, x, 0.05, 0.1, 0.1, 0.05, 0.0, t429, tasks=8 * n)
        for n, x, t429 in ((1.0, 10.0, 0.0), (2.0, 19.0, 0.0), (4.0, 37.0, 0.9))
    ]
    reasons = {}
    for k, level in enumerate(levels):
        found = stop(levels[: k + 1], StopRule())
        reasons[level.level] = None if found is None else found.reason
    findings = analyse(levels, reasons, rates=rates, slo=None)
    return SweepResult(path, levels, findings, SweepPlan(base=Plan(runs=1), rates=rates))


def test_render_is_pure_a_result_in_markdown_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_io(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the renderer touched a file")

    result = _result(tmp_path / "sweep")  # a directory that does not exist
    for name in ("open", "write_text", "write_bytes", "read_text", "mkdir", "exists", "stat"):
        monkeypatch.setattr(Path, name, no_io)
    monkeypatch.setattr(builtins, "open", no_io)
    monkeypatch.setattr(os, "open", no_io)
    text = render(result)
    monkeypatch.undo()
    assert text == markdown(result.levels, result.findings, rates=False, slo=None)
    assert text.startswith("# Sweep over concurrency\n")
    assert "| 4 | 37.00 |" in text and "## Findings" in text
    assert render(_result(tmp_path, rates=True)).startswith("# Sweep over tasks/s\n")
    assert list(tmp_path.iterdir()) == []


def test_write_puts_the_rendered_text_and_the_chart_in_the_sweep_directory(
    tmp_path: Path,
) -> None:
    result = _result(tmp_path)
    written = sweep_report.write(result)
    assert [p.name for p in written] == ["sweep.md", "sweep.png", "sweep.svg"]
    assert (tmp_path / "sweep.md").read_text(encoding="utf-8") == render(result)
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failed_write_says_how_to_take_the_sweep_up(tmp_path: Path) -> None:
    where = tmp_path / "not-a-directory"
    where.write_text("")
    with pytest.raises(StoreError, match=r"levels are kept.*perfbench sweep --resume"):
        sweep_report.write(_result(where))
