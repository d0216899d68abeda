"""What a run and a sweep leave for their caller: the directory and its documents."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfbench.spec import SweepPlan
from perfbench.stats.knee import Level
from perfbench.stats.summary import Summary
from perfbench.store.documents import Meta


@dataclass
class RunResult:
    run_dir: Path | None
    meta: Meta
    summary: Summary

    @property
    def interrupted(self) -> bool:
        return bool(self.meta["status"] == "interrupted")


@dataclass
class SweepResult:
    path: Path
    levels: list[Level]
    findings: dict[str, Any]
    plan: SweepPlan
    interrupted: bool = False  # stopped (Ctrl-C, SIGTERM): levels measured so far only
    stopped_by: str | None = None  # the signal (or a level's --abort-on limit) that stopped it
    stopped_at: float | None = None  # the level whose run it cut short
