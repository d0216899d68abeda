"""Sweep directories: one run directory per level, and the files that describe the sweep.

runs/<UTC time>_sweep_<suite>_<target>/
    level-16/              a complete run directory per level
    sweep.json             per-level figures and the findings
    sweep.md               the same as a Markdown summary
    sweep.png, sweep.svg   throughput, P95 and 429 rate against level, the knee marked
    sweep-plan.json        how the sweep was started (no keys) and whether it finished:
                           `perfbench sweep --resume DIR` continues it
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from perfbench import store
from perfbench.errors import StoreError
from perfbench.stats.summary import Summary
from perfbench.store.files import PLAN_FILE
from perfbench.store.lock import LOCK

__all__ = ["PLAN_FILE", "finished", "is_sweep", "level_dir", "read_plan", "resumable"]


def is_sweep(path: Path) -> bool:
    return (path / PLAN_FILE).is_file()


def level_dir(sweep: Path, level: float) -> Path:
    return sweep / f"level-{level:g}"


def read_plan(path: Path) -> dict[str, Any]:
    """How an unfinished sweep was started, to resume it."""
    plan_file = path / PLAN_FILE
    if not plan_file.is_file():
        if path.is_dir() and not any(p.name.startswith("level-") for p in path.iterdir()):
            # Killed before sweep-plan.json was first written: nothing was measured.
            raise StoreError(
                f"{path} has no {PLAN_FILE}: the sweep was stopped before it began, and "
                "nothing was measured. Start the sweep again (and remove this folder)"
            )
        raise StoreError(f"{path} is not a sweep directory that can resume (no {PLAN_FILE})")
    how: dict[str, Any] = store.read_json(plan_file)
    if how.get("status") == "completed":
        raise StoreError(f"{path} is complete; nothing to resume")
    if "cases" not in how and "spec" not in how:
        raise StoreError(f"{plan_file} does not record how the sweep was started")
    return how


def finished(run_dir: Path) -> Summary | None:
    """The summary of a level a previous process completed, else None."""
    meta_path = run_dir / store.META
    if not meta_path.is_file():
        return None
    meta = store.recorded_meta(run_dir)
    if meta.get("status") != "completed":
        return None
    return store.read_summary(run_dir, meta)


def resumable(run_dir: Path, open_loop: bool) -> bool:
    """Whether an existing level directory is continued (True) or the level starts afresh.
    Called under the sweep's lock, so no process is writing the level. Whatever state a kill
    left the level in is taken up: temp files are removed, a level that never wrote its
    meta.json starts afresh (anything else in it is moved aside, not lost), and an open-loop
    level, whose schedule cannot be continued, is moved aside and measured again."""
    if not run_dir.exists():
        return False
    store.remove_strays(run_dir)
    if not (run_dir / store.META).is_file():
        if {p.name for p in run_dir.iterdir()} <= {LOCK}:
            (run_dir / LOCK).unlink(missing_ok=True)
            run_dir.rmdir()  # killed between making the folder and writing meta.json
        else:
            _move_aside(run_dir)
        return False
    if open_loop:
        _move_aside(run_dir)
        return False
    return True


def _move_aside(run_dir: Path) -> None:
    """``level-N`` → ``level-N.partial-<k>``: its level is measured again from the start."""
    k = 1
    while run_dir.with_name(f"{run_dir.name}.partial-{k}").exists():
        k += 1
    run_dir.rename(run_dir.with_name(f"{run_dir.name}.partial-{k}"))


def with_levels(refs: list[str]) -> list[str]:
    """Run references, a sweep directory standing for its levels' runs in level order."""
    out: list[str] = []
    for ref in refs:
        folder = Path(ref)
        if not is_sweep(folder):
            out.append(ref)
            continue
        levels = store.list_runs(folder)
        if not levels:
            raise StoreError(f"{folder} is a sweep with no level run yet: nothing to report")
        levels.sort(key=lambda r: _level(r.path.name))
        out += [str(r.path) for r in levels]
    return out


def _level(name: str) -> tuple[float, str]:
    """A sweep level's run directory (level-<n>) in level order; other names last."""
    try:
        return float(name.removeprefix("level-")), name
    except ValueError:
        return math.inf, name
