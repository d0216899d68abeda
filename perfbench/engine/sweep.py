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
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from perfbench import store
from perfbench.engine.observer import RunObserver
from perfbench.engine.results import SweepResult
from perfbench.engine.session import Session
from perfbench.errors import StoreError
from perfbench.spec import SweepSpec
from perfbench.stats.knee import Level, StopKind, analyse, bisect, level_of, stop
from perfbench.store.sweeps import PLAN_FILE, finished, level_dir, resumable
from perfbench.suite import Suite
from perfbench.targets import Target

TargetFactory = Callable[[int], Target]  # a fresh target sized for the level's concurrency
# What the caller makes of a finished sweep's result (``report.sweep.write``: sweep.md and the
# chart): the engine measures and stores, the report layer renders.
Publish = Callable[[SweepResult], object]


class Sweep:
    """Runs ``spec``'s levels into one sweep directory (``path``: an unfinished one to take
    up). Each level is a ``Session`` of ``spec.level(level)``; the observer hears every
    level's run and ``level_finished``. A ``factory`` makes each level's target instead of
    the spec (a library caller's own target; the levels then run in one process).
    ``publish`` is handed the finished sweep's result before sweep-plan.json says completed
    (``api.sweep`` passes the report writer), so a publish that fails leaves a sweep that
    ``--resume`` finishes again from the levels kept."""

    def __init__(
        self,
        spec: SweepSpec,
        observer: RunObserver | None = None,
        *,
        suite: Suite | None = None,
        factory: TargetFactory | None = None,
        path: Path | None = None,
        publish: Publish | None = None,
    ) -> None:
        self.spec, self.plan = spec, spec.plan
        self.observer = observer or RunObserver()
        self.suite = suite if suite is not None else spec.load_suite()
        self.factory = factory
        self.publish = publish
        self.measured: dict[float, Level] = {}
        self.reasons: dict[float, str | None] = {}
        self.kinds: dict[float, StopKind | None] = {}  # what kind of limit each stop was
        self.path = path  # the sweep directory (made by run() unless resuming)
        self._session: Session | None = None  # the level running now
        self.stopped_by: str | None = None
        self.stopped_at: float | None = None  # the level that was running then
        self._stopped = False

    def stop(self, reason: str | None = None) -> None:
        """End the sweep after the level running now, which ends ``interrupted``: what was
        measured is kept, and ``perfbench sweep --resume`` takes it up."""
        self._stopped, self.stopped_by = True, reason
        if self._session is not None:
            self._session.stop(reason)

    def _ended_by(self, reason: str | None, level: float) -> None:
        """A level's run ended early: by the sweep's own stop (a signal), or by itself (its
        observer's --abort-on limit), which ends the sweep too and is what it says."""
        self.stopped_at = level
        if not self._stopped:
            self._stopped, self.stopped_by = True, reason

    def target_name(self) -> str:
        if self.factory is not None:
            return self.factory(1).name
        from perfbench.targets.registry import resolve
        from perfbench.targets.target_spec import Sizing

        return resolve(self.spec.target, Sizing(1, self.plan.base.seed)).name

    async def run(self) -> SweepResult:
        if self.path is None:
            self.path = store.new_run_dir(
                Path(self.spec.out),
                f"sweep_{self.suite.name}",
                self.target_name(),
                self.spec.label,
                datetime.now(UTC),
            )
        path = self.path
        # One process per sweep directory, for the sweep's whole life (each level's run
        # directory is locked by its session too).
        held = store.lock(path, f"perfbench sweep --resume {path}")
        try:
            store.remove_strays(path)  # temp files of a process killed while writing one
            return await self._levels(path)
        finally:
            held.release()

    async def _levels(self, path: Path) -> SweepResult:
        previous = store.read_json(path / PLAN_FILE) if (path / PLAN_FILE).is_file() else {}
        if previous.get("suite_digest", self.suite.digest) != self.suite.digest:
            raise StoreError(f"{path} was swept with another version of the suite; start anew")
        how = {**self.spec.to_doc(), "suite_digest": self.suite.digest}
        store.write_json(path / PLAN_FILE, {**how, "status": "running"})
        try:
            if self.plan.levels:
                for level in self.plan.levels:
                    await self._level(path, level)
            else:
                await self._auto(path)
        except _Interrupted:
            store.write_json(path / PLAN_FILE, {**how, "status": "interrupted"})
            levels = [self.measured[k] for k in sorted(self.measured)]
            findings = self._analyse(levels)
            return SweepResult(
                path, levels, findings, self.plan, True, self.stopped_by, self.stopped_at
            )
        except anyio.get_cancelled_exc_class():
            if self._stopped:  # a second Ctrl-C cut the stop short: resumable all the same
                store.write_json(path / PLAN_FILE, {**how, "status": "interrupted"})
            raise
        levels = [self.measured[k] for k in sorted(self.measured)]
        result = SweepResult(path, levels, self._analyse(levels), self.plan)
        self._write_findings(result)
        if self.publish is not None:
            self.publish(result)
        store.write_json(path / PLAN_FILE, {**how, "status": "completed"})
        return result

    def _analyse(self, levels: list[Level]) -> dict[str, Any]:
        plan = self.plan
        return analyse(
            levels, self.reasons, rates=plan.rates, slo=plan.slo, kinds=self.kinds, rule=plan.rule
        )

    def _write_findings(self, result: SweepResult) -> None:
        """sweep.json: the levels and the findings, what the report renders and reads back."""
        plan = self.plan
        doc = {
            "levels": [asdict(v) for v in result.levels],
            "findings": result.findings,
            "plan": {"rates": plan.rates, "rule": asdict(plan.rule), "slo": plan.slo},
        }
        store.write_json(result.path / "sweep.json", doc)

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
        spec = self.spec.level(level, workers=self.factory is None)
        run_dir = level_dir(path, level)
        done = finished(run_dir)
        if done is not None:  # a resumed sweep: measured before, read back
            summary = done
        else:
            if self._stopped:
                raise _Interrupted
            target = None if self.factory is None else self.factory(spec.plan.connections())
            self._session = Session(
                spec,
                self.observer,
                suite=self.suite,
                target=target,
                run_dir=run_dir,
                resume=resumable(run_dir, self.plan.rates),
            )
            if self._stopped:  # stopped while the level's session was being made
                self._session.stop(self.stopped_by)
            try:
                result = await self._session.run()
            finally:
                self._session = None
            if result.interrupted:  # kept on disk for --resume; not a level measured
                self._ended_by(result.meta.get("stopped_by"), level)
                raise _Interrupted
            summary = result.summary
        measured = level_of(level, summary)
        self.measured[level] = measured
        ordered = [self.measured[k] for k in sorted(self.measured)]
        found = stop([v for v in ordered if v.level <= level], self.plan.rule)
        reason = None if found is None else found.reason
        self.reasons[level], self.kinds[level] = reason, None if found is None else found.kind
        self.observer.level_finished(measured, reason, path)
        return reason


class _Interrupted(Exception):
    """The sweep was stopped: the level running then ended interrupted."""
