"""``perfbench compare``: flags and perfbench.toml → rules → ``api.compare`` → the verdict
printed (JSON, drawn on a terminal, else Markdown), written where asked, and the exit code.
``ab`` takes these options as they are (read from ``compare_``'s signature)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from perfbench import api, store
from perfbench.cli import rules as gate
from perfbench.cli.app import ExitCode, app
from perfbench.cli.output import err, errors, out, print_verdict_json, write_text
from perfbench.cli.runs import RootOpt
from perfbench.report import compare_console
from perfbench.report.junit import junit
from perfbench.stats.compare import BY_NAME
from perfbench.stats.gate import Outcome

OUTCOME_CODES: dict[Outcome, ExitCode] = {
    "pass": ExitCode.OK,
    "regression": ExitCode.REGRESSION,
    "threshold": ExitCode.THRESHOLD,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "underpowered": ExitCode.INCONCLUSIVE,  # a pass that could not have failed: --strict
}

BaselineArg = Annotated[
    str, typer.Argument(metavar="BASELINE", help="Run directory, name or label.")
]
CandidateArg = Annotated[
    str | None,
    typer.Argument(
        metavar="[CANDIDATE]",
        help="Run directory, name or label. Alone, BASELINE is checked against --threshold.",
    ),
]
MaxRegressionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--max-regression",
        help="Relative threshold per metric, e.g. p95=15% (repeatable). Metrics: "
        + ", ".join(BY_NAME),
    ),
]
FloorOpt = Annotated[
    list[str] | None,
    typer.Option("--floor", help="Absolute floor per metric, e.g. p50=5ms (repeatable)."),
]
ThresholdOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--threshold",
        help="Absolute limit on the candidate, k6 style: 'p95<2s', 'error_rate<1%', "
        "'p99{case=answer-en}<800ms' (repeatable).",
    ),
]
GateOpt = Annotated[
    str | None, typer.Option("--gate", help="Gate only these metrics: p50,p95,error_rate.")
]
ScopeOpt = Annotated[
    str | None,
    typer.Option(
        help="Gated scopes: overall (default), cases, languages or all. Overall alone is "
        "corrected with Holm (family-wise error rate); more scopes switch to "
        "Benjamini-Hochberg (false discovery rate)."
    ),
]
AlphaOpt = Annotated[
    float | None,
    typer.Option(
        help="Significance level after the correction: the chance that a comparison of "
        "the same code fails the gate. Default 0.05."
    ),
]
NoiseBarOpt = Annotated[
    float | None,
    typer.Option(
        "--noise-bar",
        help="A change counts only beyond this many run-to-run CVs of the runs compared "
        "(or its threshold, if larger). Default 2.5; 0: thresholds only.",
    ),
]
DetectOpt = Annotated[
    str | None,
    typer.Option(
        "--detect",
        help="The change every gated metric must be able to flag, e.g. 20%; default: "
        "each metric's threshold. A metric whose runs could not flag it 4 times in 5 makes "
        "the verdict underpowered (a pass that could not have failed).",
    ),
]
StrictOpt = Annotated[
    bool | None,
    typer.Option(
        "--strict/--no-strict",
        help="Fail (exit 6) on an inconclusive result (a big change that is not significant, or a "
        "run that did not complete) or an underpowered one (a gated metric that could not have "
        "failed).",
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Compare runs of different suites anyway.")]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file (default: ./perfbench.toml or pyproject)."),
]
MarkdownOpt = Annotated[
    Path | None, typer.Option("--markdown", help="Also write the Markdown summary here.")
]
JunitOpt = Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the verdict as JSON instead of Markdown.")
]
PairedOpt = Annotated[bool, typer.Option(
    "--paired",
    help="Pair the sides' runs in order (run i of each side measured together: interleaved, "
    "one run a side a round, as perfbench ab does) and test the per-pair ratios "
    "(Wilcoxon signed-rank): what a pair's two runs share, such as the machine's load at "
    "that moment, cancels out. Both sides need as many runs.")]  # fmt: skip
ConfirmOpt = Annotated[bool, typer.Option(
    "--confirm",
    help="On a regression, measure both sides again (from their meta.json, baseline first; new "
    "runs labelled <label>-confirm) and keep it only if the same metric regresses again, else "
    "the verdict is inconclusive. It re-measures the targets the runs name with the code "
    "installed now: for two commits, perfbench ab.")]  # fmt: skip


@app.command("compare")
def compare_(
    baseline_ref: BaselineArg,
    candidate_ref: CandidateArg = None,
    max_regression: MaxRegressionOpt = None,
    floor: FloorOpt = None,
    threshold: ThresholdOpt = None,
    gate_metrics: GateOpt = None,
    scope: ScopeOpt = None,
    alpha: AlphaOpt = None,
    noise_bar: NoiseBarOpt = None,
    detect: DetectOpt = None,
    paired: PairedOpt = False,
    strict: StrictOpt = None,
    force: ForceOpt = False,
    config_file: ConfigOpt = None,
    markdown_file: MarkdownOpt = None,
    junit_file: JunitOpt = None,
    as_json: JsonOpt = False,
    confirm_: ConfirmOpt = False,
    root: RootOpt = Path("runs"),
) -> None:
    """Compare a candidate run with a baseline; the exit code is the verdict.

    Each metric's run-level values are tested (one-sided exact Mann-Whitney; with --paired, as
    ab's rounds, Wilcoxon's signed-rank test on the per-pair ratios); a metric regresses
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
        settings = gate.settings(config_file)
        thresholds = [*settings.get("thresholds", []), *(threshold or [])]
        rules = gate.gate_rules(
            settings, max_regression, floor, gate_metrics, scope, alpha, noise_bar, detect, paired
        )
        strict_on = strict if strict is not None else bool(settings.get("strict", False))
        verdict = api.compare(
            baseline_ref, candidate_ref, rules=rules, thresholds=thresholds, strict=strict_on,
            force=force, root=root,
        )  # fmt: skip
        if confirm_ and verdict.outcome == "regression" and candidate_ref is not None:
            err.print(
                "Confirming the regression: measuring the baseline, then the candidate, again "
                "(the targets their runs name, with the code installed now)…",
                highlight=False,
            )
            verdict = api.confirmed(verdict, (baseline_ref, candidate_ref), rules, root=root)
    code = OUTCOME_CODES[verdict.outcome] if verdict.failed else ExitCode.OK
    with errors(), store.reading(baseline_ref, candidate_ref):
        text = verdict.markdown()
    _print(verdict, code, text, as_json, markdown_file, junit_file)
    raise typer.Exit(code)


def _print(
    verdict: api.Verdict,
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
            verdict.comparison, verdict.baseline, verdict.candidate, verdict.thresholds,
            verdict.outcome, int(code), verdict.notes,
        )  # fmt: skip
    elif out.is_terminal:
        out.print(compare_console.render(text), highlight=False)
    else:
        sys.stdout.write(text)
    with errors():
        if markdown_file is not None:
            write_text(markdown_file, text)
        if junit_file is not None:
            write_text(junit_file, junit(verdict.comparison, verdict.thresholds))
        summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_path:
            write_text(Path(summary_path), text, append=True)
