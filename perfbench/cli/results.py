"""``perfbench show``, ``compare``, ``report`` and ``export``: stored runs in, tables,
verdicts and files out."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from perfbench import config, store
from perfbench.cli import otlp
from perfbench.cli.app import ExitCode, app
from perfbench.cli.confirm import confirm, gate_rules
from perfbench.cli.output import err, errors, out, print_result, print_verdict_json, write_text
from perfbench.cli.runs import RootOpt
from perfbench.cli.watching import DetailsOpt
from perfbench.errors import GateError
from perfbench.report import compare_console, compare_md
from perfbench.report.junit import junit
from perfbench.stats.comparable import pair_notes, run_notes, stamp_notes
from perfbench.stats.compare import BY_NAME, Comparison, Rules, compare
from perfbench.stats.gate import Outcome, build_rules, fails, outcome
from perfbench.stats.summary import Summary
from perfbench.stats.thresholds import ThresholdResult, check_thresholds, parse_threshold
from perfbench.store import sides, sweeps
from perfbench.store.documents import Meta

RunArg = Annotated[str, typer.Argument(metavar="RUN", help="Run directory, name or label.")]

OUTCOME_CODES: dict[Outcome, ExitCode] = {
    "pass": ExitCode.OK,
    "regression": ExitCode.REGRESSION,
    "threshold": ExitCode.THRESHOLD,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "underpowered": ExitCode.INCONCLUSIVE,  # a pass that could not have failed: --strict
}


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


@app.command("compare")
def compare_(
    baseline_ref: Annotated[
        str, typer.Argument(metavar="BASELINE", help="Run directory, name or label.")
    ],
    candidate_ref: Annotated[
        str | None,
        typer.Argument(
            metavar="[CANDIDATE]",
            help="Run directory, name or label. Alone, BASELINE is checked against --threshold.",
        ),
    ] = None,
    max_regression: Annotated[
        list[str] | None,
        typer.Option(
            "--max-regression",
            help="Relative threshold per metric, e.g. p95=15% (repeatable). Metrics: "
            + ", ".join(BY_NAME),
        ),
    ] = None,
    floor: Annotated[
        list[str] | None,
        typer.Option("--floor", help="Absolute floor per metric, e.g. p50=5ms (repeatable)."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="Absolute limit on the candidate, k6 style: 'p95<2s', 'error_rate<1%', "
            "'p99{case=answer-en}<800ms' (repeatable).",
        ),
    ] = None,
    gate_metrics: Annotated[
        str | None, typer.Option("--gate", help="Gate only these metrics: p50,p95,error_rate.")
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option(
            help="Gated scopes: overall (default), cases, languages or all. Overall alone is "
            "corrected with Holm (family-wise error rate); more scopes switch to "
            "Benjamini-Hochberg (false discovery rate)."
        ),
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(
            help="Significance level after the correction: the chance that a comparison of "
            "the same code fails the gate. Default 0.05."
        ),
    ] = None,
    noise_bar: Annotated[
        float | None,
        typer.Option(
            "--noise-bar",
            help="A change counts only beyond this many run-to-run CVs of the runs compared "
            "(or its threshold, if larger). Default 2.5; 0: thresholds only.",
        ),
    ] = None,
    detect: Annotated[
        str | None,
        typer.Option(
            "--detect",
            help="The change every gated metric must be able to flag, e.g. 20%; default: "
            "each metric's threshold. A metric whose runs could not flag it 4 times in 5 makes "
            "the verdict underpowered (a pass that could not have failed).",
        ),
    ] = None,
    strict: Annotated[
        bool | None,
        typer.Option(
            "--strict/--no-strict",
            help=(
                "Fail (exit 6) on an inconclusive result (a big change that is not "
                "significant, or a run that did not complete) or an underpowered one (a gated "
                "metric that could not have failed)."
            ),
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compare runs of different suites anyway.")
    ] = False,
    config_file: Annotated[
        Path | None,
        typer.Option("--config", help="Settings file (default: ./perfbench.toml or pyproject)."),
    ] = None,
    markdown_file: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the Markdown summary here.")
    ] = None,
    junit_file: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the verdict as JSON instead of Markdown.")
    ] = False,
    confirm_: Annotated[
        bool,
        typer.Option(
            "--confirm",
            help="On a regression, measure both sides again (from their meta.json, baseline "
            "first; new runs labelled <label>-confirm) and keep it only if the same metric "
            "regresses again, else the verdict is inconclusive. It re-measures the targets the "
            "runs name with the code installed now: for two commits, perfbench ab.",
        ),
    ] = False,
    root: RootOpt = Path("runs"),
) -> None:
    """Compare a candidate run with a baseline; the exit code is the verdict.

    Each metric's run-level values are tested (one-sided exact Mann-Whitney); a metric regresses
    when its median moved beyond its bar (its threshold, or 2.5 times the runs' run-to-run
    CV when they are noisier: see --noise-bar) and its floor, and p < alpha after Holm's
    correction over the gated metrics. The output says what the runs can detect; `perfbench
    plan` says how many runs a smaller change needs.

    Exit codes: 0 pass (also inconclusive or underpowered without --strict), 4 regression,
    5 threshold breached, 6 inconclusive or underpowered with --strict (a change that needs
    more runs, a run that did not complete, or a gated metric that could not have failed at
    --detect), 3 perfbench error. --json prints the verdict itself as "outcome".

    Example: perfbench compare v1.3.0 v1.4.0 --strict --junit gate.xml
    """
    with errors():
        settings = config.compare_settings(config_file or config.find(Path.cwd()))
        thresholds = [
            parse_threshold(t) for t in [*settings.get("thresholds", []), *(threshold or [])]
        ]
        rules = gate_rules(
            settings, max_regression, floor, gate_metrics, scope, alpha, noise_bar, detect
        )
        if candidate_ref is None and not thresholds:
            raise GateError("give a baseline and a candidate, or one run and --threshold")
        with store.reading(baseline_ref, candidate_ref):
            found = _sides(baseline_ref, candidate_ref, rules, force, root)
            checked = check_thresholds(found.candidate_summary, thresholds)
    strict_on = strict if strict is not None else bool(settings.get("strict", False))
    complete = all(m.get("status") == "completed" for m in (found.baseline, found.candidate))
    verdict = outcome(found.result, checked, complete)
    if confirm_ and verdict == "regression" and found.result is not None:
        assert candidate_ref is not None  # a comparison has two sides
        with errors():
            checked_again = confirm(found.result, (baseline_ref, candidate_ref), rules, root)
        found.notes.append(checked_again.note)
        if not checked_again.kept:
            verdict = "inconclusive"
    code = OUTCOME_CODES[verdict] if fails(verdict, strict_on) else ExitCode.OK
    with errors(), store.reading(baseline_ref, candidate_ref):
        text = _verdict_text(found, checked, verdict, strict_on)
    _verdict(found, checked, verdict, code, text, as_json, markdown_file, junit_file)
    raise typer.Exit(code)


class _Found:
    """Both sides of a comparison, read back, and the comparison (None: thresholds only)."""

    def __init__(self, candidate: tuple[Meta, Summary], notes: list[str]) -> None:
        self.candidate, self.candidate_summary = candidate
        self.baseline: Mapping[str, Any] = self.candidate
        self.result: Comparison | None = None
        self.notes = notes


def _sides(baseline: str, candidate: str | None, rules: Rules, force: bool, root: Path) -> _Found:
    cand = sides.load_side(candidate or baseline, root)
    found = _Found(cand, list(run_notes(cand[0], "candidate")))
    if candidate is not None:
        base_meta, base_summary = sides.load_side(baseline, root)
        found.notes += pair_notes(base_meta, found.candidate, force)
        found.notes += sides.label_notes((baseline, candidate), root)
        found.notes += run_notes(base_meta, "baseline")
        found.notes += stamp_notes(base_summary, found.candidate_summary)
        found.baseline = base_meta
        found.result = compare(base_summary, found.candidate_summary, rules)
    return found


def _verdict_text(
    found: _Found, checked: list[ThresholdResult], verdict: Outcome, strict: bool
) -> str:
    """The verdict as Markdown (also what --markdown and the CI step summary get)."""
    if found.result is not None:
        return compare_md.comparison(
            found.result, found.baseline, found.candidate, checked, verdict, found.notes, strict
        )
    return compare_md.thresholds_only(found.candidate, checked, verdict, found.notes, strict)


def _verdict(
    found: _Found,
    checked: list[ThresholdResult],
    verdict: Outcome,
    code: ExitCode,
    text: str,
    as_json: bool,
    markdown_file: Path | None,
    junit_file: Path | None,
) -> None:
    """Print the verdict (JSON; on a terminal drawn, the verdict last; else Markdown) and write
    the files it goes to. JSON's outcome is the verdict; its exit_code the command's."""
    if as_json:
        print_verdict_json(
            found.result, found.baseline, found.candidate, checked, verdict, int(code), found.notes
        )
    elif out.is_terminal:
        out.print(compare_console.render(text), highlight=False)
    else:
        sys.stdout.write(text)
    with errors():
        if markdown_file is not None:
            write_text(markdown_file, text)
        if junit_file is not None:
            write_text(junit_file, junit(found.result, checked))
        summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_path:
            write_text(Path(summary_path), text, append=True)


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
    from perfbench.report import release

    with errors(), store.reading(*run_refs, baseline_ref):
        runs = [release.load(ref, root) for ref in sweeps.with_levels(run_refs)]
        baseline = release.load(baseline_ref, root) if baseline_ref else None
        if baseline is not None:
            runs = [r for r in runs if r.path.resolve() != baseline.path.resolve()]
        last = Path(run_refs[-1])  # a sweep's report is named after the sweep
        name = last.name if sweeps.is_sweep(last) else runs[-1].path.name if runs else ""
        folder = out_dir or Path("reports") / name if runs else out_dir
        if folder is None:
            raise GateError("give at least one run besides --baseline")
        rules = build_rules(config.compare_settings(config.find(Path.cwd())))
        path = release.build(runs, baseline, folder, rules)
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
