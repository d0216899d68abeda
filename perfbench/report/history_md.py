"""``perfbench history``'s report: the series of every gated metric over the runs, and each
change point with its run, magnitude and direction (pure, Markdown; report.html is converted
from it by ``report.html``)."""

from __future__ import annotations

from collections.abc import Mapping

from perfbench.report.format import TITLES, quantity, table
from perfbench.stats.history import History, Series, Shift


def chart_name(series: Series) -> str:
    return f"history-{series.metric}.png"


def markdown(found: History, charts: Mapping[str, str] | None = None) -> str:
    """The history as Markdown; ``charts``: metric → chart file linked below its section."""
    n = len(found.series[0].runs) if found.series else 0
    failing = found.regressions
    if failing:
        named = ", ".join(f"{_title(s)} at `{shift.run}`" for s, shift in failing)
        head = f"❌ regression in the last {found.recent} runs: {named}"
    else:
        head = f"no regression in the last {found.recent} runs"
    parts = [
        f"## perfbench history: {head}",
        "",
        f"{n} runs, oldest first. Change points by E-divisive means (Apache Otava), each "
        f"significant at p < {found.max_p:g} (t-test of the segments either side) and moving "
        f"the level by more than {100 * found.min_change:g}%; a metric's value is its median "
        "across the run directory's runs.",
        "",
        table(
            ("Metric", "Change points", "Newest"),
            ([_title(s), str(len(s.shifts)), _shift_text(s, s.newest)] for s in found.series),
        ),
    ]
    for series in found.series:
        parts += _section(series, (charts or {}).get(series.metric))
    parts += ["", "### Series", "", _values_table(found)]
    return "\n".join(parts) + "\n"


def _title(series: Series) -> str:
    return TITLES.get(series.metric, series.metric)


def _shift_text(series: Series, shift: Shift | None) -> str:
    if shift is None:
        return "–"
    mark = "❌ " if shift.worse else ""
    return (
        f"{mark}{shift.direction} {100 * shift.change:+.1f}% at `{shift.run}` "
        f"({quantity(shift.before, series.unit)} → {quantity(shift.after, series.unit)})"
    )


def _section(series: Series, chart: str | None) -> list[str]:
    if not series.shifts and chart is None:
        return []
    out = ["", f"### {_title(series)}", ""]
    if series.shifts:
        rows = (
            [f"`{s.run}`", str(s.index + 1), quantity(s.before, series.unit),
             quantity(s.after, series.unit), f"{100 * s.change:+.1f}%", s.direction,
             "for the worse" if s.worse else "for the better", f"{s.p:.2g}"]
            for s in series.shifts
        )  # fmt: skip
        header = ("From run", "#", "Before", "After", "Change", "Direction", "", "p")
        out.append(table(header, rows, right=(1, 2, 3, 4, 7)))
    else:
        out.append("No change point.")
    if chart is not None:
        out += ["", f"![Chart: {_title(series)} over the runs]({chart})"]
    return out


def _values_table(found: History) -> str:
    if not found.series:
        return "No gated metric in these runs."
    runs = found.series[0].runs
    header = ("#", "Run", *(_title(s) for s in found.series))
    rows = (
        [str(i + 1), f"`{run}`", *(quantity(s.values[i], s.unit) for s in found.series)]
        for i, run in enumerate(runs)
    )
    return table(header, rows, right=(0, *range(2, 2 + len(found.series))))
