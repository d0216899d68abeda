"""Every console table fits 100 (and 80) columns: no column squeezed away, no figure or name
cut to "…". Before, the per-language cost table lost its language column at 100 columns (rich
shrank its one wrappable column to nothing) and `list` cut run names to "20261…"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from perfbench import store
from perfbench.cli.runs import _runs_table
from perfbench.report import console as tables

CASES = [("answer-en", "en", 0), ("refund-policy-multilingual-ja", "ja", 3), ("plan-zh", "zh", 2)]
TAGS = ["faq", "multilingual-refunds", "tools-3"]


def _text(renderable: Any, width: int) -> str:
    out = Console(width=width, record=True, color_system=None)
    out.print(renderable)
    return out.export_text()


def _scope(estimated: bool) -> dict[str, Any]:
    """The figures of one case, language or tag, as wide as the demo suite's get: seconds-long
    latencies, six-decimal costs, and "(est.)" on every token count."""
    dist = {"p50": 1.0486, "p95": 12.3456, "p99": 12.3456, "mean": 2.5, "stddev": 1.2345, "n": 40}
    return {"tasks": 160, "ok": 160, "input_chars": 12_345, "tokens_in": 12_345,
            "tokens_out": 4_321, "tokens_per_100_chars": 86.7, "cost_per_task": 0.000774,
            "cost_per_1k_chars": 0.007705, "usage_vs_estimate": 1.02, "latency": dist,
            "ttft": dist, "tokens_estimated": estimated, "throughput": 12.34,
            "output_tokens_per_s": 1234.0}  # fmt: skip


def _run(estimated: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    m = _scope(estimated)
    across = {k: {"median": v, "min": v, "max": v, "n": 3}
              for k, v in {"latency.p50": 1.0, "latency.p95": 12.3, "latency.p99": 12.3,
                           "latency.mean": 2.5, "throughput": 12.34,
                           "output_tokens_per_s": 1234.0}.items()}  # fmt: skip
    summary = {
        "pooled": {
            "overall": m,
            "cases": {case: m for case, _, _ in CASES},
            "languages": {lang: m for _, lang, _ in CASES},
            "tags": {tag: {**m, "tasks": 160 + n} for n, tag in enumerate(TAGS)},  # distinct
        },
        "runs": [{"run": n, "overall": m} for n in range(3)],
        "across_runs": {"overall": across},
    }
    cases = [{"id": c, "language": lang, "tools": t} for c, lang, t in CASES]
    meta = {"suite": {"cases": cases}, "prices": {"priced_as": "openai/gpt-4o", "simulated": True}}
    return summary, meta


def _all_tables(estimated: bool) -> dict[str, tuple[Any, list[str]]]:
    """Each table with the identifying values it must show whole."""
    summary, meta = _run(estimated)
    ids = [c for c, _, _ in CASES]
    langs = [lang for _, lang, _ in CASES]
    return {
        "case": (tables.case_table(summary, meta), ids + langs),
        "language": (tables.language_table(summary), langs),
        "cost": (tables.cost_table(summary, meta), langs),
        "tags": (tables.cost_table(summary, meta, "tags"), TAGS),
        "run": (tables.run_table(summary), ["median"]),
    }


@pytest.mark.parametrize("width", [100, 80])
@pytest.mark.parametrize("estimated", [False, True])
def test_every_table_fits_the_terminal_with_every_column_whole(width: int, estimated: bool) -> None:
    for name, (table, identifying) in _all_tables(estimated).items():
        text = _text(table, width)
        assert "…" not in text, (name, text)
        assert max(len(line) for line in text.splitlines()) <= width, name
        cells = {cell.strip() for line in text.splitlines() for cell in line.split("┃")}
        cells |= {cell.strip() for line in text.splitlines() for cell in line.split("│")}
        for header in table.keys + table.values:
            assert header in cells, (name, header, text)  # a header of its own, not cut
        for value in identifying:
            assert value in cells, (name, value, text)
        if estimated and name in ("cost", "tags"):  # the widest cells there are
            assert "12,345 (est.)" in cells and "$0.000774 (est.)" in cells


def test_a_table_that_fits_is_one_table_and_one_that_does_not_repeats_its_keys() -> None:
    summary, meta = _run(False)
    wide = _text(tables.cost_table(summary, meta), 200)
    assert "continued" not in wide
    narrow = _text(tables.cost_table(summary, meta), 80)
    assert "Tokens and cost per language, continued" in narrow
    # Each part carries the language column, so each row still says which language it is.
    assert sum(line.startswith("┃ lang ") for line in narrow.splitlines()) == 2
    assert narrow.count("│ ja ") == 2


def test_a_split_shares_the_columns_out_evenly() -> None:
    summary, meta = _run(False)
    parts = tables.cost_table(summary, meta, "tags").tables(Console(width=100), 100)
    counts = [len(t.columns) - 1 for t in parts]
    assert len(parts) == 2 and max(counts) - min(counts) <= 1


NAME = "20261201T175949Z_cases_mock-reports-example-slower.yaml_v2_" + "x" * 31


def test_list_never_cuts_a_run_name(tmp_path: Path) -> None:
    assert len(NAME) == 90
    meta: Any = {"started_at": "2026-12-01T17:59:49+00:00", "suite": {"name": "cases"},
                 "target": "mock+http:rate-limit-knee", "label": "v2", "status": "completed",
                 "headline": {"tasks": 32, "p50": 0.292, "p95": 0.9448}}  # fmt: skip
    runs = [store.RunInfo(tmp_path / NAME, meta), store.RunInfo(tmp_path / "level-8", meta)]
    for width in (80, 100):
        text = _text(_runs_table(runs), width)
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
        first = "".join(
            line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")
        )  # the run column's folded lines, joined
        assert NAME in first
        assert "level-8" in first and "label=v2" in text and "completed" in text
