"""Rich tables for the terminal. Pure: summary and meta in, renderables out; the CLI prints.

Per-case and per-language tables show distributions pooled over all measured runs (enough
tasks for a stddev even at ``--repeat 1``); the per-run table and the overview show how much the
runs differ, which is what a release comparison tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.table import Table
from rich.text import Text

from perfbench.report.format import dollars, ms, number, seconds

PCTS = ("p50", "p95", "p99")


def _dist(metrics: Mapping[str, Any], name: str, key: str) -> float | None:
    dist = metrics.get(name)
    return None if not dist else dist.get(key)


def _latency_cells(m: Mapping[str, Any]) -> list[str]:
    cells = [ms(_dist(m, "latency", p)) for p in PCTS]
    cells += [ms(_dist(m, "latency", "stddev")), ms(_dist(m, "ttft", "p50"))]
    return cells


def _header(table: Table, first: list[str]) -> None:
    for col in first:
        table.add_column(col, no_wrap=True)
    for col in ("ok/tasks", "P50", "P95", "P99", "sd", "TTFT50", "tok out"):
        table.add_column(col, justify="right", no_wrap=True)


def _row_tail(m: Mapping[str, Any]) -> list[str]:
    return [f"{m['ok']}/{m['tasks']}", *_latency_cells(m), number(m.get("tokens_out"), 0)]


def case_table(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> Table:
    """One row per case, all measured runs pooled; times in milliseconds."""
    pooled = summary["pooled"]
    runs = len(summary["runs"])
    table = Table(title=f"Per case, {runs} runs pooled (ms)", title_justify="left")
    _header(table, ["case", "lang", "tools"])
    for case in meta["suite"]["cases"]:
        m = pooled["cases"].get(case["id"])
        if m is not None:
            table.add_row(case["id"], case["language"], str(case["tools"]), *_row_tail(m))
    table.add_section()
    table.add_row(Text("all", style="bold"), "", "", *_row_tail(pooled["overall"]))
    return table


def language_table(summary: Mapping[str, Any]) -> Table:
    table = Table(title="Per language, runs pooled (ms)", title_justify="left")
    _header(table, ["lang"])
    table.add_column("tok in", justify="right")
    for lang, m in summary["pooled"]["languages"].items():
        table.add_row(lang, *_row_tail(m), _tokens(m, "tokens_in"))
    _estimate_note(table, summary["pooled"]["languages"].values())
    return table


EST = " (est.)"


def _tokens(m: Mapping[str, Any], key: str) -> str:
    """A token count, marked when the offline tokenizer estimated it (no usage from the API)."""
    return number(m.get(key), 0) + (EST if m.get("tokens_estimated") else "")


def _dollars(m: Mapping[str, Any], key: str) -> str:
    shown = dollars(m.get(key))
    return shown + EST if m.get("tokens_estimated") and m.get(key) is not None else shown


def _estimate_note(table: Table, scopes: Iterable[Mapping[str, Any]]) -> None:
    if any(m.get("tokens_estimated") for m in scopes):
        table.caption = "(est.): the API reported no usage; tokens counted offline, a proxy"
        table.caption_justify = "left"


def cost_table(
    summary: Mapping[str, Any], meta: Mapping[str, Any], scope: str = "languages"
) -> Table:
    """Tokens and cost per language (or per tag), runs pooled: the same prompt costs different
    tokens in different languages and on different tokenizers."""
    prices = meta.get("prices") or {}
    ref = prices.get("priced_as") or "no price"
    note = " — SIMULATED costs" if prices.get("simulated") else ""
    served = (summary["pooled"].get("overall") or {}).get("models_served") or {}
    if served:  # what answered is priced, not only what was asked
        note += "; answered by " + ", ".join(f"{k} ({n} tasks)" for k, n in served.items())
    what = "language" if scope == "languages" else "tag"
    table = Table(title=f"Tokens and cost per {what} (priced as {ref}{note})", title_justify="left")
    table.add_column("lang" if scope == "languages" else "tag")
    for col in (
        "tasks",
        "chars in",
        "tok in",
        "tok out",
        "tok/100ch",
        "$/task",
        "$/1k ch",
        "P50 ms",
        "P95 ms",
        "usage/est",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    for key, m in summary["pooled"].get(scope, {}).items():
        table.add_row(
            key,
            str(m["tasks"]),
            number(m.get("input_chars"), 0),
            _tokens(m, "tokens_in"),
            _tokens(m, "tokens_out"),
            number(m.get("tokens_per_100_chars"), 1),
            _dollars(m, "cost_per_task"),
            _dollars(m, "cost_per_1k_chars"),
            ms(_dist(m, "latency", "p50")),
            ms(_dist(m, "latency", "p95")),
            number(m.get("usage_vs_estimate"), 2),
        )
    _estimate_note(table, summary["pooled"].get(scope, {}).values())
    return table


def failure_table(summary: Mapping[str, Any]) -> Table | None:
    """Each kind of failure with its count and one example message, all runs pooled."""
    failures = summary["pooled"]["overall"].get("failures") or {}
    if not failures:
        return None
    table = Table(title="Failures (measured runs)", title_justify="left")
    table.add_column("kind", no_wrap=True)
    table.add_column("tasks", justify="right")
    table.add_column("example")
    for kind, entry in sorted(failures.items(), key=lambda kv: -kv[1]["count"]):
        table.add_row(kind, str(entry["count"]), entry["example"] or "–")
    return table


def run_table(summary: Mapping[str, Any]) -> Table:
    """One row per measured run, then the median across runs: the release gate's view."""
    table = Table(title="Per run (ms); the median row is what compare uses", title_justify="left")
    table.add_column("run", no_wrap=True)
    for col in ("ok/tasks", "P50", "P95", "P99", "mean", "tasks/s", "tok/s"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in summary["runs"]:
        m = r["overall"]
        table.add_row(
            str(r["run"] + 1),
            f"{m['ok']}/{m['tasks']}",
            *(ms(_dist(m, "latency", p)) for p in (*PCTS, "mean")),
            number(m.get("throughput"), 2),
            number(m.get("output_tokens_per_s"), 0),
        )
    across = summary["across_runs"]["overall"]

    def med(key: str) -> float | None:
        return across[key]["median"] if key in across else None

    table.add_section()
    table.add_row(
        Text("median", style="bold"),
        "",
        *(ms(med(f"latency.{p}")) for p in (*PCTS, "mean")),
        number(med("throughput"), 2),
        number(med("output_tokens_per_s"), 0),
    )
    return table


def overview(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> Text:
    """What was run, then throughput, P95 and error rate as median (range over runs)."""
    suite = meta["suite"]
    lines = [
        f"{meta['target']} · suite {suite['name']} ({len(suite['cases'])} cases, digest "
        f"{suite['digest'][:12]}) · {len(summary['runs'])} runs · {meta['status']}"
    ]
    overall = summary["across_runs"]["overall"]
    parts = []
    if "throughput" in overall:
        t = overall["throughput"]
        parts.append(f"{t['median']:.2f} tasks/s (runs {t['min']:.2f}–{t['max']:.2f})")
    if "latency.p95" in overall:
        p = overall["latency.p95"]
        parts.append(f"P95 {seconds(p['median'])} ({seconds(p['min'])}–{seconds(p['max'])})")
    if "error_rate" in overall:
        parts.append(f"errors {overall['error_rate']['median']:.1%}")
    if overall.get("throttle_rate", {}).get("max"):
        parts.append(f"429 answers {overall['throttle_rate']['median']:.2f} per task")
    if parts:
        lines.append(" · ".join(parts))
    if "latency_intended.p95" in overall:
        lag = overall.get("schedule_lag.p99", {}).get("median")
        intended = overall["latency_intended.p95"]["median"]
        lines.append(
            f"open loop: P95 from intended start {seconds(intended)}"
            f" · scheduler lag P99 {seconds(lag)}"
        )
    adaptive = summary.get("adaptive")
    if adaptive and adaptive.get("converged_limit") is not None:
        lines.append(
            f"adaptive: converged limit {adaptive['converged_limit']:.1f} "
            f"({len(adaptive['history'])} changes)"
        )
    return Text("\n".join(lines))
