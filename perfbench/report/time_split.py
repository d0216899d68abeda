"""The console's "where the time went" table: per case and overall, a task's time split into
model, tool, the agent's own and client wait (stats/breakdown.py), its model calls and
tokens, and whether it succeeded (success rate, cost per successful task). Pure: summary in,
a table out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from perfbench.report.console import Grid
from perfbench.report.format import dollars, ms, number
from perfbench.report.format import table as md_table
from perfbench.report.listed import left_out, listed

VALUES = ["success", "$/success", "model P50", "model P95", "tool P50", "agent P50",
          "agent P95", "client P50", "calls", "tok out"]  # fmt: skip


def table(summary: Mapping[str, Any]) -> Grid | None:
    """None for a summary written before the split existed."""
    pooled = summary["pooled"]
    if "time_split" not in pooled["overall"]:
        return None
    grid = Grid(
        "Where the time went, per task (ms, completed tasks, runs pooled)", ["case"], VALUES
    )
    grid.caption = (
        "model: model calls on the critical path; agent: the agent's own time outside every "
        "call (start-up, planning); client: waits for a connection; success: ok and as expected"
    )
    for case, m in pooled["cases"].items():
        grid.add_row(case, *_cells(m))
    grid.add_section()
    grid.add_row(Text("all", style="bold"), *_cells(pooled["overall"]))
    return grid


def _cells(m: Mapping[str, Any]) -> list[str]:
    split, success = m["time_split"], m["success"]
    rate = success["rate"]
    return [
        "–" if rate is None else f"{rate:.1%}",
        _per_success(rate, success["cost_per_success"]),
        _pct(split["model"], "p50"),
        _pct(split["model"], "p95"),
        _pct(split["tool"], "p50"),
        _pct(split["agent"], "p50"),
        _pct(split["agent"], "p95"),
        _pct(split["client"], "p50"),
        number(m.get("model_calls")),
        number(m.get("tokens_out"), 0),
    ]


def _per_success(rate: float | None, cost: float | None) -> str:
    """Cost per successful task; "–" where no task succeeded (there is no such cost: it is not
    that the tasks were unpriced)."""
    return "–" if cost is None and rate == 0 else dollars(cost)


def _pct(distribution: Mapping[str, Any] | None, key: str) -> str:
    return ms(distribution.get(key)) if distribution else "–"


def section(runs: Sequence[tuple[str, Mapping[str, Any]]], chart: str | None) -> list[str]:
    """The release report's section: per run and case, success rate, cost per successful
    task, the mean of each part, model calls and output tokens per task (medians across
    runs), then the stacked chart."""
    across = [summary["across_runs"] for _, summary in runs]
    shown = listed(across)  # past REPORT_CASES, the slowest by P95
    rows = []
    for (name, _), cases in zip(runs, (a["cases"] for a in across), strict=True):
        for case in shown:
            m = cases.get(case)
            if m is None or "success.rate" not in m:  # a summary from before the split
                continue
            rows.append([case, name, *_md_cells(m)])
    if not rows:
        return []
    header = ("case", "run", "success", "$/success", "model", "tool", "agent", "client",
              "calls", "tok out")  # fmt: skip
    parts = ["", "## Where the time went, and success", "",
             md_table(header, rows, right=range(2, len(header))), ""]  # fmt: skip
    more = left_out(across, shown)
    parts += [more, ""] if more else []
    parts += [
        "Medians across runs of each part's mean over the tasks that finished ok (ms): model calls "
        "on the critical path, tool calls, the agent's own time outside every call, the "
        "client's wait for a connection. Success: ok and as the case expects. Calls: model "
        "calls per task; tok out: output tokens per task.",
        "",
    ]
    if chart:
        stem = chart.removesuffix(".png")
        parts += [f"![Chart: where a task's time went, per case (numbers in the table above)]"
                  f"({chart})", "", f"[SVG]({stem}.svg)"]  # fmt: skip
    return parts


def _md_cells(m: Mapping[str, Any]) -> list[str]:
    def med(key: str) -> float | None:
        entry = m.get(key)
        return entry["median"] if entry else None

    rate = med("success.rate")
    return [
        "–" if rate is None else f"{rate:.1%}",
        _per_success(rate, med("success.cost_per_success")),
        *(ms(med(f"time_split.{part}.mean")) for part in ("model", "tool", "agent", "client")),
        number(med("model_calls")),
        number(med("tokens_out"), 0),
    ]
