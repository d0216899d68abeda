"""Runs read back for a comparison: one run by reference, or one side of a comparison made of
several run directories whose runs are pooled as that side's repetitions (baseline and
candidate measured interleaved on one CI runner, one run per directory)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfbench import store
from perfbench.errors import GateError, StoreError
from perfbench.stats.advice import gaps_merged
from perfbench.stats.summary import Summary, across_runs
from perfbench.store.documents import Meta


def load_run(ref: str, root: Path) -> tuple[Path, Meta, Summary]:
    """A run's directory, meta and summary; the summary is recomputed from samples.jsonl when
    the run was killed before writing it."""
    run_dir = store.resolve_run(ref, root)
    meta = store.read_meta(run_dir)
    return run_dir, meta, store.read_summary(run_dir, meta)


def load_side(ref: str, root: Path) -> tuple[Meta, Summary]:
    """One side of a comparison: a run, or with a shell pattern (``'base-*'``) every matching
    run directory, their runs pooled as one side's repetitions."""
    if not any(ch in ref for ch in "*?["):
        _, meta, summary = load_run(ref, root)
        return meta, summary
    dirs = store.match_runs(ref, root)
    if not dirs:
        raise StoreError(f"no run directory in {root}/ has a name or label matching '{ref}'")
    loaded = [load_run(str(d), root)[1:] for d in dirs]
    if len({m["suite"].get("digest") for m, _ in loaded}) > 1:
        raise GateError(f"the runs matching '{ref}' measured different suites")
    runs = [run for _, summary in loaded for run in summary["runs"]]
    unfinished = [m["status"] for m, _ in loaded if m.get("status") != "completed"]
    meta = loaded[0][0].copy()
    meta["id"] = f"{ref} ({len(dirs)} run directories)"
    meta["label"] = None
    meta["status"] = unfinished[0] if unfinished else "completed"
    pooled: Summary = {"runs": runs, "across_runs": across_runs(runs)}
    lagged = [s["client"] for _, s in loaded if gaps_merged(s)]
    if lagged:  # one lagging run's caveat holds for the side's pooled ITL rows
        pooled["client"] = lagged[0]
    return meta, pooled


def label_notes(refs: Sequence[str], root: Path) -> list[str]:
    """A label given to several runs names the newest: say so, since it may not be the one
    meant (a re-run under the same label, a copied CI command)."""
    labels = [r for r in refs if not Path(r).is_dir() and not any(ch in r for ch in "*?[")]
    runs = store.list_runs(root) if labels else []  # one scan of the runs, not one per side
    notes = []
    for ref in dict.fromkeys(labels):
        named = [r for r in runs if r.meta.get("label") == ref]
        if len(named) > 1:
            notes.append(
                f"label '{ref}' names {len(named)} runs; the newest, {named[-1].path.name}, was "
                "used (give a run directory to choose another)"
            )
    return notes
