"""``perfbench show``, ``report`` and ``export``: stored runs in, tables and files out
(``compare`` is cli/compare.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfbench import api, store
from perfbench.cli import otlp
from perfbench.cli import rules as gate
from perfbench.cli.app import app
from perfbench.cli.output import err, errors, out, print_result
from perfbench.cli.runs import RootOpt
from perfbench.cli.watching import DetailsOpt
from perfbench.store import sides

RunArg = Annotated[str, typer.Argument(metavar="RUN", help="Run directory, name or label.")]


@app.command()
def show(
    run_ref: RunArg,
    root: RootOpt = Path("runs"),
    details: DetailsOpt = False,
) -> None:
    """Print one run's summary (recomputed from samples.jsonl if the run never finished)."""
    with errors():
        run_dir, meta, summary = sides.load_run(run_ref, root)
        with store.reading(run_dir):
            print_result(summary, meta, details=details, run_dir=run_dir)


@app.command()
def report(
    run_refs: Annotated[
        list[str], typer.Argument(metavar="RUN...", help="Run directories, names or labels.")
    ],
    baseline_ref: Annotated[
        str | None,
        typer.Option("--baseline", help="Compare every other run with this one (also a RUN)."),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Report folder (default: reports/<last run's name>)."),
    ] = None,
    root: RootOpt = Path("runs"),
) -> None:
    """Write report.md with charts (PNG and SVG), and report.html, for one or more runs.

    With --baseline it opens on the verdict of each run against it (what regressed, by how
    much, p, and what the runs can detect; judged by the [compare] settings of perfbench.toml,
    as `perfbench compare` judges), paste-ready for a PR comment or a CI job summary. Then
    latency by percentile (all runs overlaid), P95 per case with run-to-run ranges, throughput
    and errors, tokens and cost per language, the adaptive limit over time and the sweep curve
    when present, each chart after the table of its numbers, and the full comparison.
    report.html is the same report in one file, charts inside, that opens offline. Reads only
    meta.json and summary.json, so it is fast on large runs.
    """
    with errors():
        rules = gate.configured()
        path = api.report(run_refs, baseline=baseline_ref, out=out_dir, rules=rules, root=root)
    out.print(f"Report: [bold]{path}[/] and {path.with_suffix('.html').name}", highlight=False)


@app.command("export")
def export_(
    run_ref: RunArg,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="csv, parquet (needs pyarrow), json (lines), or otlp-json (OpenTelemetry "
            "spans and metrics, docs/opentelemetry.md). Default: csv, or none with --otlp.",
        ),
    ] = None,
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file (default: samples.<ext> in the run dir)."),
    ] = None,
    phase: Annotated[str, typer.Option(help="measured, warmup or all.")] = "measured",
    root: RootOpt = Path("runs"),
    otlp_url: otlp.OtlpOpt = None,
) -> None:
    """Write a run's samples as a table (one row per task) for notebooks and other tools,
    or as OpenTelemetry traces (--format otlp-json, or --otlp URL to send them).

    From Python: `perfbench.export.load_run(path).samples()` gives the same pandas DataFrame.
    """
    from perfbench import export

    fmt = otlp.export_format(fmt, otlp_url, export.FORMATS)
    if phase not in export.PHASES:
        raise typer.BadParameter(f"--phase is one of {', '.join(export.PHASES)}")
    with errors(), store.reading(run_ref):
        otlp.check(otlp_url)
        run = export.load_run(store.resolve_run(run_ref, root))
        written = otlp.export(run, fmt, out_path, phase, otlp_url)
    if written is not None:
        err.print(f"Wrote [bold]{written}[/]", highlight=False)
