"""``compare --confirm``: a regression is measured again before it fails a build. Both sides
are re-run from their meta.json specs, baseline first, into new directories beside the old
(labelled ``<label>-confirm``), and compared with the same rules; the regression stands only
if the same metric regresses again (``stats.gate.confirmed``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfbench import api
from perfbench.cli.output import err
from perfbench.errors import GateError
from perfbench.stats.compare import Comparison, Rules, compare
from perfbench.stats.gate import confirmed
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
