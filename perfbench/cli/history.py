"""``perfbench history``: the series of every release's runs, and where each gated metric's
level shifted (``stats.history``: E-divisive means, Apache Otava's). Exit 4 when the newest
change point of a metric is for the worse and among the last ``--recent`` runs."""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from perfbench import store
from perfbench.cli import config
from perfbench.cli.app import ExitCode, app
from perfbench.cli.output import err, errors, write_text
from perfbench.cli.runs import RootOpt
from perfbench.errors import GateError
from perfbench.report import history_md
from perfbench.stats import history as lib
from perfbench.stats.gate import build_rules
from perfbench.stats.thresholds import quantity

ORDERS = ("time", "label", "name")


RunRefsOpt = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[RUN...]",
        help="Runs in the series: directories, names, labels or patterns ('v1.*'); "
        "default: every run under --root.",
    ),
]
OrderOpt = Annotated[
    str,
    typer.Option(
        help="Order of the series: time (when each run started), label (as versions: "
        "v1.9 before v1.10) or name.",
    ),
]
RecentOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Exit 4 when a metric's newest change point is for the worse and within "
        "this many of the newest runs (a change point needs a few runs after it to show).",
    ),
]
MaxPOpt = Annotated[
    float,
    typer.Option("--max-p", min=1e-9, max=0.5, help="Significance of a change point."),
]
MinChangeOpt = Annotated[
    str,
    typer.Option("--min-change", help="A change point must also move the level this much."),
]
GateMetricsOpt = Annotated[
    str | None, typer.Option("--gate", help="Only these metrics: p50,p95,throughput.")
]
OutDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Also write history.md, its charts and history.html into this folder.",
    ),
]
ConfigFileOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file (default: ./perfbench.toml or pyproject)."),
]


@app.command("history")
def history(
    run_refs: RunRefsOpt = None,
    order: OrderOpt = "time",
    recent: RecentOpt = 6,
    max_p: MaxPOpt = lib.MAX_P,
    min_change: MinChangeOpt = "5%",
    gate_metrics: GateMetricsOpt = None,
    out_dir: OutDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON.")] = False,
    config_file: ConfigFileOpt = None,
    root: RootOpt = Path("runs"),
) -> None:
    """Find where each gated metric's level shifted over a series of runs (one per release).

    A pairwise gate lets a slow drift through, one small step at a time; the series shows it.
    Each point is a run directory (its metrics' medians across its runs); change points come
    from E-divisive means with a t-test (Apache Otava, as MongoDB and DataStax gate). Needs
    the optional extra: pip install 'perfbench-llm[history]'.

    Exit codes: 0 no recent regression, 4 a metric's newest change point is for the worse
    within the last --recent runs, 3 perfbench error.

    Example: perfbench history 'release-*' --order label --out reports/history
    """
    with errors():
        if order not in ORDERS:
            raise GateError(f"--order {order}: one of {', '.join(ORDERS)}")
        settings = config.compare_settings(config_file or config.find(Path.cwd()))
        rules = build_rules(settings, gate=[gate_metrics] if gate_metrics else None)
        infos = _ordered(_chosen(run_refs or [], root), order)
        if len(infos) < 3:
            raise GateError(
                f"{len(infos)} run(s) found: a history needs 3 or more (one per release)"
            )
        names = [_name(i) for i in infos]
        with store.reading(*(i.path for i in infos)):
            overall = [store.read_summary(i.path, i.meta)["across_runs"]["overall"] for i in infos]
        least = quantity(min_change, "--min-change")
        found = lib.history(names, overall, rules, min(recent, len(infos)), max_p, least)
        text = history_md.markdown(found, _charts(found, out_dir))
        if out_dir is not None:
            _write(found, text, out_dir)
    if as_json:
        doc = {"outcome": "regression" if found.regressions else "pass", **asdict(found)}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(text)
    raise typer.Exit(ExitCode.REGRESSION if found.regressions else ExitCode.OK)


def _chosen(refs: Sequence[str], root: Path) -> list[store.RunInfo]:
    """The runs the references name (each once); every run under ``root`` when none are
    given. A reference that names nothing is an error, not a shorter series."""
    every = store.list_runs(root)
    if not refs:
        return every
    chosen: dict[Path, store.RunInfo] = {}
    for ref in refs:
        path = Path(ref)
        if (path / "meta.json").is_file():
            matched = [store.RunInfo(path, store.read_meta(path))]
        else:
            matched = [i for i in every if _matches(i, ref)]
        if not matched:
            raise GateError(f"no run under {root} is named or labelled '{ref}'")
        chosen.update((i.path.resolve(), i) for i in matched)
    return list(chosen.values())


def _matches(info: store.RunInfo, pattern: str) -> bool:
    label = str(info.meta.get("label") or "")
    return fnmatch.fnmatchcase(info.path.name, pattern) or fnmatch.fnmatchcase(label, pattern)


def _ordered(infos: list[store.RunInfo], order: str) -> list[store.RunInfo]:
    if order == "time":
        return sorted(infos, key=lambda i: (str(i.meta.get("started_at", "")), i.path.name))
    if order == "label":
        return sorted(infos, key=lambda i: (_version_key(str(i.meta.get("label") or "")),
                                            i.path.name))  # fmt: skip
    return sorted(infos, key=lambda i: i.path.name)


def _version_key(text: str) -> tuple[Any, ...]:
    """Natural order: the numbers in a label compare as numbers (v1.10 after v1.9)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text))


def _name(info: store.RunInfo) -> str:
    return str(info.meta.get("label") or info.path.name)


def _charts(found: lib.History, out_dir: Path | None) -> dict[str, str]:
    if out_dir is None:
        return {}
    return {s.metric: history_md.chart_name(s) for s in found.series}


def _write(found: lib.History, text: str, out_dir: Path) -> None:
    from perfbench.report import charts, html
    from perfbench.report.format import TITLES
    from perfbench.report.release import embedded

    write_text(out_dir / "history.md", text)  # makes the folder, or says why it cannot
    for s in found.series:
        shifts = [(x.index, x.before, x.after, x.worse) for x in s.shifts]
        stem = out_dir / history_md.chart_name(s).removesuffix(".png")
        charts.history_chart(TITLES.get(s.metric, s.metric), s.runs, s.values, shifts, s.unit,
                             stem)  # fmt: skip
    used = [history_md.chart_name(s) for s in found.series]
    page = html.page(text, embedded(out_dir, used), "perfbench history")
    write_text(out_dir / "history.html", page)
    err.print(f"History: [bold]{out_dir / 'history.md'}[/] and history.html", highlight=False)
