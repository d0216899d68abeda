"""A sweep: one run per load level (concurrency or rate) into one sweep directory, then where
the target stops scaling. Levels are given, or found by doubling until a stop condition and
refined by bisection between the last good and the first bad level.

    runs/<UTC time>_sweep_<suite>_<target>/
        level-0016/            a complete run directory per level
        sweep.json             per-level figures and the findings
        sweep.md               the same as a Markdown summary
        sweep.png, sweep.svg   throughput, P95 and 429 rate against level, the knee marked
        sweep-plan.json        how the sweep was started (no keys) and whether it finished:
                               `perfbench sweep --resume DIR` continues it

A resumed sweep keeps every finished level (read back, not measured again), resumes an
interrupted closed-loop level, and measures an interrupted open-loop level again (its schedule
cannot be continued) after moving the partial one aside to ``level-<N>.partial-<k>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfbench import store
from perfbench.errors import StoreError
from perfbench.events import Progress
from perfbench.load import Rate
from perfbench.load.knee import (
    Level,
    StopRule,
    bisect,
    client_bound,
    in_flight,
    kneedle,
    slo_max,
    usl,
    verdict,
)
from perfbench.runner import Plan
from perfbench.session import Session
from perfbench.suite import Suite
from perfbench.targets import Target
from perfbench.targets.registry import TargetOptions
from perfbench.workers import auto_workers

TargetFactory = Callable[[int], Target]  # a fresh target sized for the level's concurrency
PLAN_FILE = "sweep-plan.json"


@dataclass(frozen=True)
class SweepPlan:
    base: Plan  # runs, warmup, repeat, seed for every level
    levels: tuple[float, ...] = ()  # explicit levels; empty means doubling (auto)
    rates: bool = False  # levels are tasks/s (open loop) rather than concurrency
    max_level: float = 1024
    rule: StopRule = field(default_factory=StopRule)
    bisect_steps: int = 4
    slo: tuple[str, float] | None = None  # ("p95", 2.0)
    workers: int = 0  # processes per level; 0: chosen per level (workers.auto_workers)


def plan_doc(plan: SweepPlan) -> dict[str, Any]:
    """The plan as JSON, for sweep-plan.json."""
    doc = asdict(plan)
    doc["base"].pop("load", None)  # a level's load is derived from the level
    return doc


def plan_from_doc(doc: dict[str, Any]) -> SweepPlan:
    return SweepPlan(
        base=Plan(**doc["base"]),
        levels=tuple(doc["levels"]),
        rates=doc["rates"],
        max_level=doc["max_level"],
        rule=StopRule(**doc["rule"]),
        bisect_steps=doc["bisect_steps"],
        slo=(doc["slo"][0], doc["slo"][1]) if doc["slo"] else None,
        workers=doc.get("workers", 0),  # absent from sweeps started before workers existed
    )


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
        findings = analyse(levels, self.plan, self.reasons)
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
        (path / "sweep.md").write_text(markdown(levels, findings, self.plan), encoding="utf-8")
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
        run_dir = path / f"level-{level:g}"
        done = _finished(run_dir)
        if done is not None:  # a resumed sweep: measured before, read back
            summary, interrupted = done, False
        else:
            watch = self.progress
            session = Session(
                self.suite,
                self.factory(concurrency),
                plan,
                run_dir=run_dir,
                resume=_resumable(run_dir, self.plan.rates),
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


def _finished(run_dir: Path) -> dict[str, Any] | None:
    """The summary of a level a previous process completed, else None."""
    meta_path = run_dir / store.META
    if not meta_path.is_file():
        return None
    meta = store.read_json(meta_path)
    if meta.get("status") != "completed":
        return None
    summary: dict[str, Any] = store.read_summary(run_dir, meta)
    return summary


def _resumable(run_dir: Path, open_loop: bool) -> bool:
    """Whether an existing level directory is continued (True) or the level starts afresh. An
    open-loop level cannot continue its schedule: the partial one is moved aside, not lost."""
    if not run_dir.exists():
        return False
    if not (run_dir / store.META).is_file():
        if any(run_dir.iterdir()):
            raise StoreError(f"{run_dir} has files but no meta.json: move it away and resume")
        run_dir.rmdir()  # killed between making the folder and writing meta.json
        return False
    if open_loop:
        k = 1
        while run_dir.with_name(f"{run_dir.name}.partial-{k}").exists():
            k += 1
        run_dir.rename(run_dir.with_name(f"{run_dir.name}.partial-{k}"))
        return False
    return True


def level_of(level: float, summary: dict[str, Any]) -> Level:
    overall = summary["across_runs"]["overall"]

    def med(key: str) -> float | None:
        entry = overall.get(key)
        return None if entry is None else float(entry["median"])

    return Level(
        level=level,
        throughput=med("throughput") or 0.0,
        p50=med("latency.p50"),
        p95=med("latency.p95"),
        p99=med("latency.p99"),
        mean=med("latency.mean"),
        error_rate=med("error_rate") or 0.0,
        throttle_rate=med("throttle_rate") or 0.0,
        tasks=med("tasks") or 0.0,
    )


def analyse(
    levels: list[Level], plan: SweepPlan, reasons: dict[float, str | None]
) -> dict[str, Any]:
    good = [v for v in levels if reasons.get(v.level) is None]
    bad = [v for v in levels if reasons.get(v.level) is not None]
    fit = usl(levels)
    limited = [v.level for v in levels if not plan.rates and client_bound(v)]
    knee = max((v.level for v in good), default=None) if bad else None
    return {
        "knee": knee,  # the largest level before a stop condition (after bisection)
        "stopped_by": {str(v.level): reasons[v.level] for v in bad},
        "plateau_throughput": max((v.throughput for v in good), default=None),
        "kneedle": kneedle(levels),
        "usl": asdict(fit) if fit else None,
        "slo_max_level": slo_max(levels, *plan.slo) if plan.slo else None,
        "in_flight": {str(v.level): in_flight(v) for v in levels},
        "client_bound_levels": limited,
    }


def markdown(levels: list[Level], findings: dict[str, Any], plan: SweepPlan) -> str:
    """The sweep as Markdown: a table per level and the findings. Pure."""
    unit = "tasks/s" if plan.rates else "concurrency"
    lines = [
        f"# Sweep over {unit}",
        "",
        f"| {unit} | tasks/s | P50 ms | P95 ms | P99 ms | errors | 429s | in flight |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in levels:
        sustained = in_flight(v)
        lines.append(
            f"| {v.level:g} | {v.throughput:.2f} | {_ms(v.p50)} | {_ms(v.p95)} | {_ms(v.p99)} "
            f"| {v.error_rate:.1%} | {v.throttle_rate:.1%} "
            f"| {'–' if sustained is None else f'{sustained:.1f}'} |"
        )
    lines += ["", "## Findings", ""]
    knee = findings["knee"]
    if knee is not None:
        lines.append(
            f"- Knee at {knee:g} ({unit}); plateau {findings['plateau_throughput']:.2f} tasks/s."
        )
        for level, why in findings["stopped_by"].items():
            lines.append(f"  - {level}: {why}")
    elif findings["stopped_by"]:
        lines.append("- Even the lowest level broke a stop condition; try lower levels:")
        for level, why in findings["stopped_by"].items():
            lines.append(f"  - {level}: {why}")
    else:
        lines.append("- No stop condition was reached: no knee in the levels measured.")
    if findings["kneedle"] is not None:
        lines.append(f"- Kneedle knee of throughput on log2({unit}): {findings['kneedle']:g}.")
    fit = findings["usl"]
    if fit:
        n_star = "none" if fit["n_star"] is None else f"{fit['n_star']:.1f}"
        lines.append(
            f"- USL: σ={fit['sigma']:.4f}, κ={fit['kappa']:.5f}, N*={n_star}, R²={fit['r2']:.3f}."
        )
    if plan.slo:
        lines.append(
            f"- Largest level with {plan.slo[0]} < {plan.slo[1]:g} s: {findings['slo_max_level']}."
        )
    if findings["client_bound_levels"]:
        levels_text = ", ".join(f"{v:g}" for v in findings["client_bound_levels"])
        lines.append(
            f"- The client could not keep the planned tasks in flight at {levels_text} "
            "(Little's law): those levels measure perfbench, not the target."
        )
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value * 1e3:.1f}"
