"""``compare --confirm``: a regression is measured again before it fails a build. Both sides
are re-run from their meta.json specs, baseline first, into new directories beside the old
(labelled ``<label>-confirm``), and compared with the same rules; the regression stands only
if the same metric regresses again (``stats.gate.confirmed``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfbench import api, config, store
from perfbench.cli.output import err
from perfbench.errors import GateError
from perfbench.stats.compare import Comparison, Rules, compare
from perfbench.stats.gate import build_rules, confirmed
from perfbench.store import sides


@dataclass(frozen=True)
class Confirmation:
    kept: bool  # the regression was seen again
    note: str  # what the re-run found, for the verdict's notes


def confirm(first: Comparison, refs: tuple[str, str], rules: Rules, root: Path) -> Confirmation:
    """Measure both sides again and say whether ``first``'s regressions hold."""
    if any(ch in ref for ref in refs for ch in "*?["):
        raise GateError("--confirm measures one run a side again: give runs, not patterns")
    dirs = [sides.load_run(ref, root)[0] for ref in refs]
    err.print(
        "Confirming the regression: measuring the baseline, then the candidate, again (the "
        "targets their runs name, with the code installed now)…",
        highlight=False,
    )
    results = [api.rerun(run_dir) for run_dir in dirs]
    for result in results:
        if result.meta.get("status") != "completed" or result.run_dir is None:
            raise GateError(f"--confirm: the re-run {result.run_dir} did not complete")
    second = compare(results[0].summary, results[1].summary, rules)
    kept = confirmed(first, second)
    names = ", ".join(f"{r.metric}" + (f" ({r.key})" if r.key else "") for r in first.regressions)
    again = " and ".join(str(r.run_dir) for r in results)
    if kept:
        shown = ", ".join(
            f"{r.metric} {100 * (r.change or 0):+.1f}%" for r in second.regressions
            if (r.scope, r.key, r.metric) in {(k.scope, k.key, k.metric) for k in kept}
        )  # fmt: skip
        return Confirmation(
            True, f"confirmed: measured again ({again}), it regressed again: {shown}"
        )
    return Confirmation(
        False,
        f"not confirmed: measured again ({again}), {names} did not regress again; the verdict "
        "is inconclusive (a fluke, or a change too small for these runs: `perfbench plan`)",
    )


# compare's flags that shape its rules (``regressed`` takes them as compare does).
RULE_FLAGS = ("max_regression", "floor", "gate_metrics", "scope", "alpha", "noise_bar", "detect",
              "config_file")  # fmt: skip


def regressed(
    baseline_ref: str,
    candidate_ref: str,
    root: Path,
    max_regression: list[str] | None = None,
    floor: list[str] | None = None,
    gate_metrics: str | None = None,
    scope: str | None = None,
    alpha: float | None = None,
    noise_bar: float | None = None,
    detect: str | None = None,
    config_file: Path | None = None,
) -> bool:
    """Whether ``compare`` with these flags finds a regression, printing nothing: ``ab``'s cue
    to measure confirmation rounds before it fails a build."""
    settings = config.compare_settings(config_file or config.find(Path.cwd()))
    rules = gate_rules(
        settings, max_regression, floor, gate_metrics, scope, alpha, noise_bar, detect
    )
    with store.reading(baseline_ref, candidate_ref):
        base = sides.load_side(baseline_ref, root)[1]
        cand = sides.load_side(candidate_ref, root)[1]
    return bool(compare(base, cand, rules).regressions)


def gate_rules(
    settings: Mapping[str, Any],
    max_regression: list[str] | None,
    floor: list[str] | None,
    gate_metrics: str | None,
    scope: str | None,
    alpha: float | None,
    noise_bar: float | None,
    detect: str | None,
) -> Rules:
    """The rules ``compare``'s flags and settings make (the flags win)."""
    return build_rules(
        settings, max_regression or (), floor or (), [gate_metrics] if gate_metrics else None,
        [scope] if scope else None, alpha, noise_bar, detect,
    )  # fmt: skip
