"""Rich tables for the terminal. Pure: summary and meta in, renderables out; the CLI prints.

Per-case and per-language tables show distributions pooled over all measured runs (enough
tasks for a stddev even at ``--repeat 1``); the per-run table and the overview show how much the
runs differ, which is what a release comparison tests.

Every table is a ``Grid``: one rich table when it fits the terminal, else split into tables of
as many figure columns as fit, each repeating the identifying columns (case, language, tag,
run). Left to itself, rich squeezes a table into the terminal by shrinking its one wrappable
column to nothing (the per-language cost table lost its language column at 100 columns) and
cutting numbers to "…"."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from perfbench.report import slo
from perfbench.report.adaptive import adaptive_line
from perfbench.report.format import THIN, THIN_LINE, dollars, ms, number, seconds, thin
from perfbench.stats.advice import ITL_CAVEAT, gaps_merged

PCTS = ("p50", "p95", "p99")
Cell = str | Text
UNBOUNDED = 10_000  # a width no table reaches: to measure a table's natural width
KEY_WIDTH = 28  # a compact table's name columns: wider names are cut, rows never broken
SCREEN_CASES = 16  # the most cases the default screen lists, else the slowest of them


@dataclass
class Grid:
    """A table as data, laid out when printed, at the console's width. ``keys`` are the
    identifying columns (left, never wrapped, in every part), ``values`` the figure columns
    (right-aligned)."""

    title: str
    keys: list[str]
    values: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    sections: set[int] = field(default_factory=set)  # a rule above these rows
    caption: str | None = None
    more: str | None = None  # the title of the parts after the first
    compact: bool = False  # no outer frame, and names past KEY_WIDTH cut to "…"

    def add_row(self, *cells: Cell) -> None:
        self.rows.append(list(cells))

    def add_section(self) -> None:
        self.sections.add(len(self.rows))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.tables(console, options.max_width)

    def tables(self, console: Console, width: int) -> list[Table]:
        """As few tables as fit ``width``, the figure columns in order and shared out evenly
        (a split of 7 and 1 columns reads worse than 4 and 4)."""
        parts = self._greedy(console, width)
        even = _even(len(self.values), len(parts))
        if all(self._width(console, part) <= width for part in even):
            parts = even
        more = self.more or f"{self.title}, continued"
        last = len(parts) - 1
        return [
            self._table(part, self.title if n == 0 else more, n == last)
            for n, part in enumerate(parts)
        ]

    def _greedy(self, console: Console, width: int) -> list[list[int]]:
        parts: list[list[int]] = [[]]
        for i in range(len(self.values)):
            if parts[-1] and self._width(console, [*parts[-1], i]) > width:
                parts.append([])
            parts[-1].append(i)
        return parts

    def _width(self, console: Console, columns: Sequence[int]) -> int:
        table = self._table(columns, None, False)
        return Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum

    def _table(self, columns: Sequence[int], title: str | None, last: bool) -> Table:
        if self.compact:
            table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        else:
            table = Table(title=title, title_justify="left")
        for key in self.keys:
            table.add_column(key, no_wrap=True, max_width=KEY_WIDTH if self.compact else None)
        for i in columns:
            table.add_column(self.values[i], justify="right", no_wrap=True)
        if last and self.caption:
            table.caption, table.caption_justify = self.caption, "left"
        width = len(self.keys)
        for n, row in enumerate(self.rows):
            if n in self.sections:
                table.add_section()
            table.add_row(*row[:width], *(row[width + i] for i in columns))
        return table


def _even(count: int, parts: int) -> list[list[int]]:
    """``count`` column indices in ``parts`` runs of (nearly) equal length."""
    size, extra = divmod(count, parts)
    out: list[list[int]] = []
    start = 0
    for n in range(parts):
        end = start + size + (1 if n < extra else 0)
        out.append(list(range(start, end)))
        start = end
    return out


def _dist(metrics: Mapping[str, Any], name: str, key: str) -> float | None:
    dist = metrics.get(name)
    return None if not dist else dist.get(key)


def _latency_cells(m: Mapping[str, Any]) -> list[str]:
    n = _dist(m, "latency", "n")
    cells = [ms(_dist(m, "latency", p)) + (THIN if thin(n, p) else "") for p in PCTS]
    cells += [ms(_dist(m, "latency", "stddev")), ms(_dist(m, "ttft", "p50"))]
    return cells


FIGURES = ["ok/tasks", "P50", "P95", "P99", "sd", "TTFT50", "tok out"]


def _row_tail(m: Mapping[str, Any]) -> list[str]:
    return [f"{m['ok']}/{m['tasks']}", *_latency_cells(m), number(m.get("tokens_out"), 0)]


def case_table(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> Grid:
    """One row per case, all measured runs pooled; times in milliseconds."""
    pooled = summary["pooled"]
    runs = len(summary["runs"])
    table = Grid(f"Per case, {_runs(runs)} pooled (ms)", ["case", "lang", "tools"], FIGURES)
    for case in meta["suite"]["cases"]:
        m = pooled["cases"].get(case["id"])
        if m is not None:
            table.add_row(case["id"], case["language"], str(case["tools"]), *_row_tail(m))
    table.add_section()
    table.add_row(Text("all", style="bold"), "", "", *_row_tail(pooled["overall"]))
    _thin_note(table)
    return table


def _thin_note(table: Grid) -> None:
    if _has_thin(table):
        table.caption = THIN_LINE


def _has_thin(table: Grid) -> bool:
    return any(THIN in cell for row in table.rows for cell in row if isinstance(cell, str))


def _fewest_per_run(summary: Mapping[str, Any]) -> float:
    """The fewest successful tasks of any measured run: a median over runs of a percentile
    is no better than the thinnest run's (16 tasks a run: each run's P95 is its slowest)."""
    counts = (_dist(r["overall"], "latency", "n") or 0 for r in summary["runs"])
    return min(counts, default=0)


def case_summary(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> Grid:
    """The default screen's one table: a row per case (the slowest SCREEN_CASES by P95 when
    there are more), then all of them; frameless, so that it fits one screen."""
    pooled = summary["pooled"]
    columns = ["ok/tasks", "P50", "P95", "P99", "TTFT50", "tok out"]
    table = Grid(f"Per case, {_runs(len(summary['runs']))} pooled (ms)", ["case", "lang"], columns)
    table.compact = True
    cases = pooled["cases"]
    shown = [c for c in meta["suite"]["cases"] if c["id"] in cases]
    if len(shown) > SCREEN_CASES:
        table.caption = (
            f"the {SCREEN_CASES} slowest of {len(shown)} cases by P95; --details lists all"
        )
        shown = _slowest(shown, cases)
    for case in shown:
        table.add_row(case["id"], case["language"], *_compact_tail(cases[case["id"]]))
    # No rule above it (a frameless table's rule is a blank line): the bold name sets it apart.
    table.add_row(Text("all", style="bold"), "", *_compact_tail(pooled["overall"]))
    # The headline below marks its per-run percentiles too: the note serves both.
    if _has_thin(table) or any(thin(_fewest_per_run(summary), p) for p in PCTS):
        table.caption = "; ".join(c for c in (table.caption, THIN_LINE) if c)
    return table


def _slowest(shown: list[Mapping[str, Any]], cases: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``SCREEN_CASES`` cases of ``shown`` with the highest P95 (ties: the first), in
    their order. One case's figures read at a time: a run's may be made when read, and 10^5
    cases' together are gigabytes (stats/summary.CaseFigures)."""

    def rank(k: int) -> tuple[float, int]:
        return -(_dist(cases[shown[k]["id"]], "latency", "p95") or 0.0), k

    return [shown[k] for k in sorted(heapq.nsmallest(SCREEN_CASES, range(len(shown)), rank))]


def _compact_tail(m: Mapping[str, Any]) -> list[str]:
    return [
        f"{m['ok']}/{m['tasks']}",
        *_latency_cells(m)[:3],
        ms(_dist(m, "ttft", "p50")),
        number(m.get("tokens_out"), 0),
    ]


def language_table(summary: Mapping[str, Any]) -> Grid:
    table = Grid("Per language, runs pooled (ms)", ["lang"], [*FIGURES, "tok in"])
    for lang, m in summary["pooled"]["languages"].items():
        table.add_row(lang, *_row_tail(m), _tokens(m, "tokens_in"))
    _thin_note(table)
    _estimate_note(table, summary["pooled"]["languages"].values())
    return table


EST = " (est.)"


def _tokens(m: Mapping[str, Any], key: str) -> str:
    """A token count, marked when the offline tokenizer estimated it (no usage from the API)."""
    return number(m.get(key), 0) + (EST if m.get("tokens_estimated") else "")


def _dollars(m: Mapping[str, Any], key: str) -> str:
    shown = dollars(m.get(key))
    return shown + EST if m.get("tokens_estimated") and m.get(key) is not None else shown


def _estimate_note(table: Grid, scopes: Iterable[Mapping[str, Any]]) -> None:
    if any(m.get("tokens_estimated") for m in scopes):
        note = "(est.): the API reported no usage; tokens counted offline, a proxy"
        table.caption = f"{table.caption}\n{note}" if table.caption else note


def cost_table(
    summary: Mapping[str, Any], meta: Mapping[str, Any], scope: str = "languages"
) -> Grid:
    """Tokens and cost per language (or per tag), runs pooled: the same prompt costs different
    tokens in different languages and on different tokenizers."""
    prices = meta.get("prices") or {}
    ref = prices.get("priced_as") or "no price"
    note = " — SIMULATED costs" if prices.get("simulated") else ""
    served = (summary["pooled"].get("overall") or {}).get("models_served") or {}
    if served:  # what answered is priced, not only what was asked
        note += "; answered by " + ", ".join(f"{k} ({n} tasks)" for k, n in served.items())
    what = "language" if scope == "languages" else "tag"
    columns = ["tasks", "chars in", "tok in", "tok out", "tok/100ch", "$/task", "$/1k ch"]
    latency = scope != "languages"  # the per-language table has them already
    # tags overlap (a case has several), so two may cover the same tasks; languages do not
    columns += ["P50 ms", "P95 ms", "usage/est"] if latency else ["usage/est"]
    key = "lang" if scope == "languages" else "tag"
    title = f"Tokens and cost per {what}"
    table = Grid(f"{title} (priced as {ref}{note})", [key], columns, more=f"{title}, continued")
    scopes = summary["pooled"].get(scope, {})
    for names, m in _distinct(scopes) if latency else scopes.items():
        times = [ms(_dist(m, "latency", p)) for p in ("p50", "p95")] if latency else []
        table.add_row(
            names,
            str(m["tasks"]),
            number(m.get("input_chars"), 0),
            _tokens(m, "tokens_in"),
            _tokens(m, "tokens_out"),
            number(m.get("tokens_per_100_chars"), 1),
            _dollars(m, "cost_per_task"),
            _dollars(m, "cost_per_1k_chars"),
            *times,
            number(m.get("usage_vs_estimate"), 2),
        )
    _estimate_note(table, summary["pooled"].get(scope, {}).values())
    return table


def _distinct(scopes: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """One row per distinct set of figures: tags that always go together (faq and no-tools on
    the same cases) measured the same tasks, so they share a row, named "faq = no-tools"."""
    rows: dict[str, tuple[list[str], Mapping[str, Any]]] = {}
    for name, m in scopes.items():
        names, _ = rows.setdefault(json.dumps(m, sort_keys=True, default=str), ([], m))
        names.append(name)
    return [(" = ".join(names), m) for names, m in rows.values()]


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


def run_table(summary: Mapping[str, Any]) -> Grid:
    """One row per measured run, then the median across runs: the release gate's view."""
    table = Grid(
        "Per run (ms); the median row is what compare uses",
        ["run"],
        ["ok/tasks", "P50", "P95", "P99", "mean", "tasks/s", "tok/s"],
    )
    for r in summary["runs"]:
        m = r["overall"]
        table.add_row(
            str(r["run"] + 1),
            f"{m['ok']}/{m['tasks']}",
            *_latency_cells(m)[:3],
            ms(_dist(m, "latency", "mean")),
            number(m.get("throughput"), 2),
            number(m.get("output_tokens_per_s"), 0),
        )
    across = summary["across_runs"]["overall"]

    def med(key: str) -> float | None:
        return across[key]["median"] if key in across else None

    fewest = _fewest_per_run(summary)
    table.add_section()
    table.add_row(
        Text("median", style="bold"),
        "",
        *(ms(med(f"latency.{p}")) + (THIN if thin(fewest, p) else "") for p in PCTS),
        ms(med("latency.mean")),
        number(med("throughput"), 2),
        number(med("output_tokens_per_s"), 0),
    )
    _thin_note(table)
    return table


def _runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


def what_ran(meta: Mapping[str, Any], runs: int) -> str:
    suite = meta["suite"]
    return (
        f"{meta['target']} · suite {suite['name']} ({len(suite['cases'])} cases, "
        f"{suite['digest'][:12]}) · {_runs(runs)} · {meta['status']}" + _engine(meta)
    )


def headline(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> Text:
    """The figures people came for, printed last so that the terminal leaves them in view:
    what ran; tasks and output tokens per second, errors and cost; latency and TTFT. Each is
    the median over the runs; throughput and P95 with their range when the runs differ."""
    overall = summary["across_runs"]["overall"]
    rate = [_median(overall, "throughput", "{} tasks/s", lambda v: number(v, 2), True)]
    rate[0] += _of_offered(meta, overall)
    rate.append(_median(overall, "output_tokens_per_s", "{} output tokens/s", number_0))
    if "error_rate" in overall:
        rate.append(f"errors {overall['error_rate']['median']:.1%}")
    rate.append(_success(summary))
    fewest = _fewest_per_run(summary)
    times = [
        _median(overall, f"latency.{p}", p.upper() + " {}", seconds, p == "p95", thin(fewest, p))
        for p in PCTS
    ]
    times.append(_median(overall, "ttft.p50", "TTFT P50 {}", seconds))
    lines = [" · ".join(r for r in rate if r), " · ".join(t for t in times if t)]
    lines.append(_cost(summary["pooled"]["overall"], meta))
    first = Text(what_ran(meta, len(summary["runs"])), style="dim")
    return Text("\n").join([first, *(Text(line, style="bold") for line in lines if line)])


def number_0(value: float | None) -> str:
    return number(value, 0)


def _median(
    overall: Mapping[str, Any],
    key: str,
    form: str,
    shown: Callable[[float | None], str],
    spread: bool = False,
    marked: bool = False,
) -> str:
    """The median over the runs in ``form`` (with ``spread``, also the runs' range when they
    differ; ``marked``: THIN after the value); empty when the runs have no such figure."""
    if key not in overall:
        return ""
    m = overall[key]
    value = shown(m["median"]) + (THIN if marked else "")
    if spread and m["min"] != m["max"]:
        low, high = shown(m["min"]), shown(m["max"])
        unit = " ms" if low.endswith(" ms") and high.endswith(" ms") else ""
        value += f" ({low.removesuffix(unit)}–{high})"
    return form.format(value)


def _success(summary: Mapping[str, Any]) -> str:
    """The success rate (ok and as the case expects), where it says more than the error rate:
    when some tasks finished but missed their expect. Empty otherwise."""
    if not summary["pooled"]["overall"].get("expect_mismatch"):
        return ""
    rate = summary["across_runs"]["overall"].get("success.rate")
    return "" if rate is None else f"success {rate['median']:.1%}"


def _cost(pooled: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    per_task = pooled.get("cost_per_task")
    if per_task is None:
        return "cost unpriced"
    total = per_task * pooled.get("tasks", 0)
    simulated = " (SIMULATED)" if (meta.get("prices") or {}).get("simulated") else ""
    success = _per_success(pooled)
    return f"cost {dollars(per_task)}/task{success}, {dollars(total)} in all{simulated}"


def _per_success(pooled: Mapping[str, Any]) -> str:
    """What one success cost (the failures' cost included), when some task did not succeed:
    otherwise it is the cost per task again."""
    success = pooled.get("success") or {}
    per = success.get("cost_per_success")
    if per is None or success.get("tasks") == pooled.get("tasks"):
        return ""
    return f", {dollars(per)}/successful task"


def notes(
    summary: Mapping[str, Any], meta: Mapping[str, Any], details: bool = False
) -> Text | None:
    """The lines only some runs have (429s, open loop, multi-turn, goodput, server metrics,
    adaptive limit); with ``details`` also the request counts every run has. None: no line."""
    overall = summary["across_runs"]["overall"]
    lines = []
    if overall.get("throttle_rate", {}).get("max"):
        lines.append(f"429 answers {overall['throttle_rate']['median']:.2f} per task")
    if "latency_intended.p95" in overall:
        lag = overall.get("schedule_lag.p99", {}).get("median")
        intended = overall["latency_intended.p95"]["median"]
        lines.append(
            f"open loop: {_offered(meta, overall)}P95 from intended start {seconds(intended)}"
            f" · scheduler lag P99 {seconds(lag)}"
        )
    pooled = summary["pooled"]["overall"]
    lines.extend(_serving(pooled, details))
    if details or pooled.get("goodput") or summary.get("scenario"):
        # What a tail claim rests on: beside an SLO or a scenario; else one more line for
        # --details (on the short screen it would be the longest line of all).
        lines.extend(slo.tail_claims(pooled))
    lines.extend(slo.stamp_lines(summary.get("scenario")))
    lines.extend(_server(summary.get("server_metrics")))
    adaptive = adaptive_line(summary)
    if adaptive is not None:
        lines.append(adaptive)
    return Text("\n".join(lines)) if lines else None


def _engine(meta: Mapping[str, Any]) -> str:
    """Where the load came from, when not this one process: Ray actors, worker processes."""
    ray = meta.get("ray")
    if ray:
        nodes = ray.get("nodes")
        where = f" on {nodes} node{'s' if nodes != 1 else ''}" if nodes else ""
        return f" · Ray ({ray.get('address')}): {ray.get('actors')} actors{where}"
    workers = (meta.get("plan") or {}).get("workers") or 1
    return f" · {workers} worker processes" if workers > 1 else ""


def _offered(meta: Mapping[str, Any], overall: Mapping[str, Any]) -> str:
    """Offered against achieved: what k6 and GuideLLM users read first in an open loop (a
    trace's rate is its mean: its arrivals over its span)."""
    offered = (meta.get("load") or {}).get("per_second")
    achieved = (overall.get("throughput") or {}).get("median")
    if not offered or achieved is None:
        return ""
    return (
        f"offered {offered:.2f} tasks/s, achieved {achieved:.2f} completed "
        f"({achieved / offered:.0%}) · "
    )


def _of_offered(meta: Mapping[str, Any], overall: Mapping[str, Any]) -> str:
    """The headline's offered rate beside the achieved one (an open loop): the line above the
    table said it, but the headline, the last thing on the screen, gave only tasks/s."""
    offered = (meta.get("load") or {}).get("per_second")
    achieved = (overall.get("throughput") or {}).get("median")
    if not offered or achieved is None:
        return ""
    return f" of {offered:.2f} offered ({achieved / offered:.0%})"


def _serving(pooled: Mapping[str, Any], details: bool) -> list[str]:
    """Request-level counts (a task of 3 model calls is 3 requests; with ``details``),
    multi-turn figures and goodput against --slo, all runs pooled; the distributions are in
    ``serving_table``."""
    lines = []
    requests, rate = pooled.get("requests"), pooled.get("request_tokens_per_s") or {}
    if requests and details:
        failed = pooled.get("request_error_rate") or 0.0
        line = f"requests {requests} ({failed:.1%} failed)"
        if rate.get("n"):
            line += (
                f" · output tokens/s per request: median {number(rate.get('p50'), 1)}, "
                f"mean {number(rate.get('mean'), 1)}"
            )
        lines.append(line)
    turn, turn_ttft = pooled.get("turn_latency"), pooled.get("turn_ttft") or {}
    if turn and turn.get("n"):
        lines.append(
            f"turns {turn['n']} · per turn: latency {_pcts(turn)} · TTFT {_pcts(turn_ttft)} "
            "(P50/P90/P99; multi-turn cases)"
        )
    good = pooled.get("goodput")
    if good:
        lines.append(
            f"goodput ({good['slo']}): {_share(good['request_share'])} of requests "
            f"({number(good['request_rate'], 2)}/s), {_share(good['task_share'])} of tasks "
            f"({number(good['task_rate'], 2)}/s) met every objective"
        )
        lines.extend(slo.verdict(good))
    return lines


# The streaming distributions, each over what it is defined on (docs/metrics.md).
SERVING_ROWS = (
    ("request_ttft", "TTFT", "request"),
    ("ttft", "TTFT, first call", "task"),
    ("ttfo", "TTFO", "task"),
    ("itl_pooled", "ITL, every gap", "gap"),
    ("itl", "ITL, mean gap", "task"),
    ("tpot", "TPOT", "request"),
)
SERVING_PCTS = ("p50", "p90", "p95", "p99", "p99_9")


def serving_table(summary: Mapping[str, Any]) -> Grid | None:
    """TTFT, TTFO, ITL and TPOT by percentile, all runs pooled (ms); None without streaming."""
    pooled = summary["pooled"]["overall"]
    rows = [(key, name, per) for key, name, per in SERVING_ROWS if _dist(pooled, key, "n")]
    if not rows:
        return None
    table = Grid(
        "Streaming, runs pooled (ms)",
        ["figure", "per"],
        ["n", "P50", "P90", "P95", "P99", "P99.9", "mean"],
    )
    caveat = f" ({ITL_CAVEAT})" if gaps_merged(summary) else ""
    for key, name, per in rows:
        m = pooled[key]
        table.add_row(
            name + (caveat if key.startswith("itl") else ""),
            per,
            number(m["n"], 0),
            *(ms(m.get(p)) for p in SERVING_PCTS),
            ms(m["mean"]),
        )
    return table


def _pcts(distribution: Mapping[str, Any]) -> str:
    return "/".join(seconds(distribution.get(p)) for p in ("p50", "p90", "p99"))


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _server(scraped: Mapping[str, Any] | None) -> list[str]:
    """What the server's own metrics said during the run (--server-metrics): its first few
    series, the engines' queue and cache gauges first."""
    if not scraped:
        return []
    head = f"server metrics: {scraped['scrapes']} scrapes of {scraped['url']}"
    if scraped["failed"]:
        head += f", {scraped['failed']} failed ({scraped['first_error']})"
    shown = [
        f"{key} max {number(entry['max'], 2)} mean {number(entry['mean'], 2)}"
        for key, entry in list(scraped["series"].items())[:3]
    ]
    return [" · ".join([head, *shown])]
