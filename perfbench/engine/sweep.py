"""A sweep: one run per load level (concurrency or rate) into one sweep directory
(``store.sweeps``), then where the target stops scaling (``stats.knee``). Levels are given, or
found by doubling until a stop condition and refined by bisection between the last good and
the first bad level.

A resumed sweep keeps every finished level (read back, not measured again), resumes an
interrupted closed-loop level, and measures an interrupted open-loop level again (its schedule
cannot be continued) after moving the partial one aside to ``level-<N>.partial-<k>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfbench import store
from perfbench.engine.session import Session
from perfbench.errors import StoreError
from perfbench.events import Progress
from perfbench.load import Rate
from perfbench.report.sweep_md import markdown
from perfbench.spec import SweepPlan, auto_workers
from perfbench.stats.knee import Level, analyse, bisect, level_of, verdict
from perfbench.store.sweeps import PLAN_FILE, finished, level_dir, resumable
from perfbench.suite import Suite
from perfbench.targets import Target
from perfbench.targets.registry import TargetOptions

TargetFactory = Callable[[int], Target]  # a fresh target sized for the level's concurrency


@dataclass
class SweepResult:
    path: Path | None
    levels: list[Level]
    findings: dict[str, Any]


class Sweep:
    def __init__(
        self,
        suite: Suite,
        factory: TargetFactory,
        plan: SweepPlan,
        *,
        out_root: Path,
        target_name: str,
        on_level: Callable[[Level, str | None], None] | None = None,
        invocation: dict[str, Any] | None = None,
        resume: Path | None = None,
        progress: Progress | None = None,
        recipe: Callable[[int], tuple[str, TargetOptions]] | None = None,
    ) -> None:
        self.progress = progress  # the live view of each level's run, when given
        # How a worker process rebuilds the target at a concurrency; without it, one process.
        self.recipe = recipe
        self.suite, self.factory, self.plan = suite, factory, plan
        self.out_root, self.target_name = out_root, target_name
        self.on_level = on_level
        self.invocation = invocation  # how to start it again (for --resume); no keys in it
        self.measured: dict[float, Level] = {}
        self.reasons: dict[float, str | None] = {}
        self.path: Path | None = resume  # the sweep directory (made by run() unless resuming)

    async def run(self) -> SweepResult:
        if self.path is None:
            self.path = store.new_run_dir(
                self.out_root,
                f"sweep_{self.suite.name}",
                self.target_name,
                None,
                datetime.now(UTC),
            )
        path = self.path
        previous = store.read_json(path / PLAN_FILE) if (path / PLAN_FILE).is_file() else {}
        if previous.get("suite_digest", self.suite.digest) != self.suite.digest:
            raise StoreError(f"{path} was swept with another version of the suite; start anew")
        how = {**previous, **(self.invocation or {}), "suite_digest": self.suite.digest}
        store.write_json(path / PLAN_FILE, {**how, "status": "running"})
        if self.plan.levels:
            for level in self.plan.levels:
                await self._level(path, level)
        else:
            await self._auto(path)
        levels = [self.measured[k] for k in sorted(self.measured)]
        rates, slo = self.plan.rates, self.plan.slo
        findings = analyse(levels, self.reasons, rates=rates, slo=slo)
        doc = {
            "levels": [asdict(v) for v in levels],
            "findings": findings,
            "plan": {
                "rates": self.plan.rates,
                "rule": asdict(self.plan.rule),
                "slo": self.plan.slo,
            },
        }
        store.write_json(path / "sweep.json", doc)
        text = markdown(levels, findings, rates=rates, slo=slo)
        (path / "sweep.md").write_text(text, encoding="utf-8")
        store.write_json(path / PLAN_FILE, {**how, "status": "completed"})
        if levels:
            from perfbench.report.charts import sweep_chart  # matplotlib loads only here

            unit = "tasks/s" if self.plan.rates else "concurrency"
            sweep_chart(levels, findings["knee"], path / "sweep", unit)
        return SweepResult(path, levels, findings)

    async def _auto(self, path: Path) -> None:
        level, good, bad = 1.0, None, None
        while level <= self.plan.max_level:
            reason = await self._level(path, level)
            if reason is not None:
                bad = level
                break
            good = level
            level *= 2
        for _ in range(self.plan.bisect_steps):
            if good is None or bad is None:
                break
            mid = bisect(good, bad)
            if mid is None:
                break
            if await self._level(path, mid) is None:
                good = mid
            else:
                bad = mid

    async def _level(self, path: Path, level: float) -> str | None:
        plan = self.plan.base
        if self.plan.rates:
            plan = replace(plan, load=Rate(per_second=level))
        else:
            plan = replace(plan, concurrency=int(level), load=None)
        concurrency = plan.connections()
        count = (self.plan.workers or auto_workers(plan)) if self.recipe else 1
        plan = replace(plan, workers=count)
        run_dir = level_dir(path, level)
        done = finished(run_dir)
        if done is not None:  # a resumed sweep: measured before, read back
            summary, interrupted = done, False
        else:
            watch = self.progress
            session = Session(
                self.suite,
                self.factory(concurrency),
                plan,
                run_dir=run_dir,
                resume=resumable(run_dir, self.plan.rates),
                on_pass=watch.phase if watch else None,
                observers=[watch.sample] if watch else None,
                on_start=watch.started if watch else None,
                recipe=self.recipe(concurrency) if self.recipe else None,
            )
            if watch is not None:
                watch.planned = session.planned_tasks()
                watch.in_flight = session.runner.tasks_in_flight
            try:
                result = await session.run()
            finally:
                if watch is not None:
                    watch.finished("level", 0, None)
            summary, interrupted = result.summary, result.interrupted
        measured = level_of(level, summary)
        self.measured[level] = measured
        ordered = [self.measured[k] for k in sorted(self.measured)]
        reason = verdict([v for v in ordered if v.level <= level], self.plan.rule)
        self.reasons[level] = reason
        if self.on_level is not None:
            self.on_level(measured, reason)
        if interrupted:
            raise KeyboardInterrupt
        return reason
