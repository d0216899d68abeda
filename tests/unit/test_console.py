"""The console tables (pure renderers): what `run` and `show` print."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from perfbench.report import console as tables


def _text(renderable: Any) -> str:
    out = Console(width=200, record=True, color_system=None)
    out.print(renderable)
    return out.export_text()


def _summary(estimated: bool) -> dict[str, Any]:
    lang = {"tasks": 4, "ok": 4, "input_chars": 40, "tokens_in": 12, "tokens_out": 30,
            "tokens_per_100_chars": 30.0, "cost_per_task": 0.00042, "cost_per_1k_chars": 0.0105,
            "latency": {"p50": 0.1, "p95": 0.2, "p99": 0.2, "mean": 0.1, "stddev": 0.01},
            "tokens_estimated": estimated}  # fmt: skip
    return {"pooled": {"languages": {"en": lang}, "overall": lang}, "runs": []}


def test_estimated_tokens_and_their_cost_are_marked_in_the_terminal_too() -> None:
    """The Markdown report said "(est.)"; the terminal tables did not, so `show` after a run
    against a server that sent no usage read as measured counts."""
    meta = {"prices": {"priced_as": "openai/gpt-4o"}}
    estimated = _text(tables.cost_table(_summary(True), meta))
    assert "12 (est.)" in estimated and "30 (est.)" in estimated
    assert "$0.000420 (est.)" in estimated and "tokens counted offline" in estimated
    assert "(est.)" in _text(tables.language_table(_summary(True)))
    assert "(est.)" not in _text(tables.cost_table(_summary(False), meta))


def test_the_header_says_where_the_load_came_from() -> None:
    """A run on Ray said nothing of Ray, nor of how many actors on how many nodes."""
    from perfbench.report.console import _engine

    ray = {"ray": {"address": "local", "actors": 2, "nodes": 1}, "plan": {"workers": 2}}
    assert _engine(ray) == " · Ray (local): 2 actors on 1 node"
    assert _engine({"plan": {"workers": 3}}) == " · 3 worker processes"
    assert _engine({"plan": {"workers": 1}}) == ""


def test_one_run_is_one_run_not_1_runs() -> None:
    """`--stages` and `--abort-on` runs often have one run: their header said "1 runs"."""
    suite = {"name": "s", "cases": [{"id": "a"}], "digest": "0123456789abcdef"}
    meta = {"target": "mock", "status": "completed", "suite": suite}
    assert " · 1 run · completed" in tables.what_ran(meta, 1)
    assert " · 2 runs · completed" in tables.what_ran(meta, 2)
