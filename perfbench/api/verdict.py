"""compare's verdict, assembled for ``api.compare``: both sides read back (a run, or a pattern's
runs pooled), compared by the gate's rules, the candidate checked against absolute thresholds,
and judged (``stats.gate.outcome``); a confirmation re-measures both sides and keeps the
regression only if it is seen again. The statistics are ``stats/``'s, the Markdown
``report.compare_md``'s: this module reads runs and composes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfbench import store
from perfbench.engine.results import RunResult
from perfbench.errors import GateError
from perfbench.report import compare_md
from perfbench.stats.comparable import pair_notes, run_notes, stamp_notes
from perfbench.stats.compare import Comparison, Rules, compare
from perfbench.stats.gate import Outcome, confirmed, fails, outcome
from perfbench.stats.thresholds import Threshold, ThresholdResult, check_thresholds
from perfbench.store import sides


@dataclass(frozen=True)
class Verdict:
    """What ``api.compare`` found. ``outcome`` is the gate's word (pass, regression,
    threshold, inconclusive, underpowered); ``failed`` whether it fails a build (with
    ``strict``, an inconclusive or underpowered outcome does too)."""

    outcome: Outcome
    comparison: Comparison | None  # None: one run checked against thresholds alone
    thresholds: list[ThresholdResult]
    baseline: Mapping[str, Any]  # the baseline's meta.json (the candidate's, thresholds alone)
    candidate: Mapping[str, Any]
    notes: list[str] = field(default_factory=list)  # what makes the comparison doubtful
    strict: bool = False

    @property
    def failed(self) -> bool:
        return fails(self.outcome, self.strict)

    def markdown(self) -> str:
        """The verdict as `perfbench compare` prints it (what --markdown and CI get)."""
        if self.comparison is not None:
            return compare_md.comparison(
                self.comparison, self.baseline, self.candidate, self.thresholds,
                self.outcome, self.notes, self.strict,
            )  # fmt: skip
        return compare_md.thresholds_only(
            self.candidate, self.thresholds, self.outcome, self.notes, self.strict
        )


def judge(
    baseline: str,
    candidate: str | None,
    rules: Rules,
    thresholds: Sequence[Threshold],
    *,
    strict: bool,
    force: bool,
    root: Path,
) -> Verdict:
    """Both sides read back and judged; ``candidate`` None checks ``baseline`` against the
    thresholds alone."""
    with store.reading(baseline, candidate):
        cand_meta, cand_summary = sides.load_side(candidate or baseline, root)
        notes = list(run_notes(cand_meta, "candidate"))
        base_meta: Mapping[str, Any] = cand_meta
        comparison = None
        if candidate is not None:
            base_meta, base_summary = sides.load_side(baseline, root)
            notes += pair_notes(base_meta, cand_meta, force)
            notes += sides.label_notes((baseline, candidate), root)
            notes += run_notes(base_meta, "baseline")
            notes += stamp_notes(base_summary, cand_summary)
            comparison = compare(base_summary, cand_summary, rules)
        checked = check_thresholds(cand_summary, thresholds)
    complete = all(m.get("status") == "completed" for m in (base_meta, cand_meta))
    found = outcome(comparison, checked, complete)
    return Verdict(found, comparison, checked, base_meta, cand_meta, notes, strict)


def run_dirs(refs: tuple[str, str], root: Path) -> list[Path]:
    """The two run directories a confirmation measures again (one run a side, not patterns)."""
    if any(ch in ref for ref in refs for ch in "*?["):
        raise GateError("--confirm measures one run a side again: give runs, not patterns")
    return [sides.load_run(ref, root)[0] for ref in refs]


def reconsider(verdict: Verdict, again: Sequence[RunResult], rules: Rules) -> Verdict:
    """``verdict``'s regression measured again (``again``: the baseline's and the candidate's
    re-runs): kept if the same metric regresses again, else the verdict is inconclusive."""
    first = verdict.comparison
    assert first is not None  # only a comparison's regression is confirmed
    for result in again:
        if result.meta.get("status") != "completed" or result.run_dir is None:
            raise GateError(f"--confirm: the re-run {result.run_dir} did not complete")
    second = compare(again[0].summary, again[1].summary, rules)
    kept = confirmed(first, second)
    where = " and ".join(str(r.run_dir) for r in again)
    if kept:
        ids = {(k.scope, k.key, k.metric) for k in kept}
        shown = ", ".join(
            f"{r.metric} {100 * (r.change or 0):+.1f}%"
            for r in second.regressions
            if (r.scope, r.key, r.metric) in ids
        )
        note = f"confirmed: measured again ({where}), it regressed again: {shown}"
        return replace(verdict, notes=[*verdict.notes, note])
    names = ", ".join(f"{r.metric}" + (f" ({r.key})" if r.key else "") for r in first.regressions)
    note = (
        f"not confirmed: measured again ({where}), {names} did not regress again; the verdict "
        "is inconclusive (a fluke, or a change too small for these runs: `perfbench plan`)"
    )
    return replace(verdict, outcome="inconclusive", notes=[*verdict.notes, note])
