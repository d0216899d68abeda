"""How every report writes a figure: one set of formatters for the console tables, the
Markdown reports, sweep.md and JUnit, so the same value reads the same everywhere. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from perfbench.stats.compare import Row, Spread
from perfbench.stats.power import tasks_for

TITLES = {
    "p50": "P50 latency",
    "p95": "P95 latency",
    "p99": "P99 latency",
    "mean": "mean latency",
    "ttft_p50": "TTFT P50",
    "ttft_p95": "TTFT P95",
    "throughput": "throughput",
    "error_rate": "error rate",
    "rate_429": "429 answers per task",
    "tokens_in": "tokens in / task",
    "tokens_out": "tokens out / task",
    "cost": "cost / task",
    "ttft_p99": "TTFT P99",
    "ttfo_p50": "TTFO P50",
    "itl_p50": "ITL P50 (every gap)",
    "itl_p99": "ITL P99 (every gap)",
    "tpot_p50": "TPOT P50",
    "goodput": "goodput (tasks meeting --slo)",
    "success_rate": "success rate (ok and as expected)",
    "cost_per_success": "cost / successful task",
    "model_p95": "model time P95",
    "agent_p95": "agent's own time P95",
    "tool_p95": "tool time P95",
}


# Markdown's inline metacharacters: escaped in a user's string (a label, a model or case name,
# an error text), it reads as its text and never as a link, an image, HTML or emphasis. A pipe
# is left to ``table``, which escapes it in every cell.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>!~&])")
# Line and paragraph breaks and other control characters: one would end the line a string
# is on and start a heading or a table row of its own.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def md_text(value: object) -> str:
    """A user's string (run label, target, model, case, tag, error text) as Markdown that
    reads as exactly that text, on one line."""
    return _MARKDOWN.sub(r"\\\1", _CONTROL.sub(" ", str(value)))


def md_code(value: object) -> str:
    """A user's string as inline code, on one line (a backtick would end the span: it reads
    as ``'``)."""
    return "`" + _CONTROL.sub(" ", str(value)).replace("`", "'") + "`"


def seconds(value: float | None) -> str:
    """A duration for people: ``1.20 ms``, ``340.1 ms``, ``2.41 s``; ``–`` when there is none."""
    if value is None:
        return "–"
    if abs(value) < 0.01:
        return f"{value * 1e3:.2f} ms"
    if abs(value) < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def ms(value: float | None) -> str:
    """A duration as a bare number of milliseconds, for columns headed '(ms)'."""
    if value is None:
        return "–"
    return f"{value * 1e3:,.2f}" if value < 0.01 else f"{value * 1e3:,.1f}"


def number(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def dollars(value: float | None) -> str:
    if value is None:
        return "unpriced"
    return f"${value:.6f}" if value < 0.01 else f"${value:.4f}"


def quantity(value: float | None, unit: str) -> str:
    """A figure in its unit for a table cell; ``–`` when there is none."""
    if value is None:
        return "–"
    if unit == "s":
        return seconds(value)
    if unit == "rate":
        return f"{100 * value:.2f}%"
    if unit == "per task":  # a count per task (429 answers): may exceed 1, never a share
        return f"{value:,.2f}"
    if unit == "tasks/s":
        return f"{value:,.2f}/s"
    if unit == "USD":
        return dollars(value)
    return f"{value:,.1f}"


def spread(s: Spread | None, unit: str, mark: str = "") -> str:
    """Median with the run-to-run range, the way every comparison cell reads; ``mark`` (THIN)
    after the median."""
    if s is None:
        return "–"
    if s.n == 1 or s.min == s.max:
        return quantity(s.median, unit) + mark
    return f"{quantity(s.median, unit)}{mark} ({quantity(s.min, unit)}–{quantity(s.max, unit)})"


def change(row: Row) -> str:
    if row.baseline is None or row.candidate is None:
        return "–"
    if row.unit == "rate":  # rates near zero: a change in points, not a ratio
        return f"{100 * (row.candidate.median - row.baseline.median):+.2f} pts"
    if row.change is None:
        return "new" if row.candidate.median else "0"
    return f"{100 * row.change:+.1f}%"


def p_value(row: Row) -> str:
    """A row's p as the comparison tables print it: ``exact`` for a deterministic figure
    compared without a test, the Benjamini-Hochberg q beside p when rows were corrected."""
    if row.exact:
        return "exact"
    if row.p is None:
        return "–"
    text = f"{row.p:.3f}"
    return f"{text} (q {row.q:.3f})" if row.q is not None else text


def table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[int] = ()) -> str:
    """A GitHub table; ``right`` lists the columns to right-align. Pipes in cells are escaped."""
    aligned = set(right)
    delims = ["---:" if i in aligned else "---" for i in range(len(header))]
    lines = [_line(header), _line(delims)]
    lines += [_line([c.replace("|", "\\|") for c in r]) for r in rows]
    return "\n".join(lines)


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


# A nearest-rank percentile over fewer tasks than 1 / (1 - q) is the slowest task (a case
# measured once a run had P50 = P95): marked where it is printed, with THIN_NOTE beside.
THIN = "*"
THIN_NOTE = (
    "*: fewer tasks than the percentile needs (P50 2, P95 20, P99 100): it is the slowest "
    "task; raise --repeat for a percentile"
)
# The terminal's: one line under an 80-column table, so that a run still fits one screen.
THIN_LINE = "*: too few tasks for it (P50 2, P95 20, P99 100): the slowest task"


def thin(tasks: float | None, key: str) -> bool:
    """Whether percentile ``key`` (``p95``) over ``tasks`` tasks is only their maximum."""
    if tasks is None or not key.startswith("p") or not key[1:].isdigit():
        return False
    return tasks < tasks_for(int(key[1:]) / 10 ** len(key[1:]))
