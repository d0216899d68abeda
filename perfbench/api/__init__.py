"""The library's entry points: run a spec, take up an interrupted run, sweep; then judge runs
(``compare``), size them (``plan``) and report on them (``report``). The CLI is a face over
these (flags → spec → here → exit code); a script or notebook calls them the same way::

    from perfbench import Plan, RunSpec, TargetSpec, api

    spec = RunSpec.build(["cases/"], TargetSpec("mock"), Plan(runs=3))
    result = api.run(spec)
    print(result.meta["status"], result.summary["across_runs"]["overall"]["latency.p95"])
    verdict = api.compare("v1.3.0", "v1.4.0")  # labels, names, directories or patterns
    print(verdict.outcome, verdict.failed)

Each call runs its own event loop (asyncio with uvloop when installed, as the CLI does); from
inside a running loop, ``await Session(spec, observer).run()`` instead. Bad input (a case file,
a target string, a run directory) raises a ``PerfbenchError`` before anything runs.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc

from perfbench import host, store
from perfbench.api import needs, verdict
from perfbench.api.needs import Needs
from perfbench.api.verdict import Verdict
from perfbench.engine.observer import RunObserver
from perfbench.engine.results import RunResult, SweepResult
from perfbench.engine.session import Session
from perfbench.engine.sweep import Sweep
from perfbench.errors import GateError, StoreError
from perfbench.report import sweep as sweep_report
from perfbench.spec import RunSpec, SweepSpec
from perfbench.stats import planning, power
from perfbench.stats.compare import Rules
from perfbench.stats.thresholds import Threshold, parse_threshold
from perfbench.store import sweeps

__all__ = ["Needs", "RunResult", "SweepResult", "Verdict", "check", "compare", "confirmed",
           "extend", "more_runs", "plan", "report", "rerun", "resume", "resume_sweep", "run",
           "sweep"]  # fmt: skip


def check(spec: RunSpec) -> None:
    """Raise what a run of ``spec`` would refuse before its first task (its cases, its target,
    a suite the target cannot run), without running anything: ``run -t A -t B`` checks every
    target before the first one's run, not after it."""
    spec.build_target().check(spec.load_suite())


def run(
    spec: RunSpec, observer: RunObserver | None = None, *, interruptible: bool = True
) -> RunResult:
    """Carry out ``spec`` into a new run directory under ``spec.out``. ``interruptible``: the
    first Ctrl-C stops the run cleanly (what was measured is kept, the run is ``interrupted``
    and can be resumed), a second aborts at once; only in the main thread."""
    result: RunResult = _drive(Session(spec, observer), observer, interruptible)
    return result


def resume(
    run_dir: Path, observer: RunObserver | None = None, *, interruptible: bool = True
) -> RunResult:
    """Continue an interrupted run as it was started (its meta.json records the spec): the
    tasks it finished are kept, the rest run."""
    result: RunResult = _drive(resumed(run_dir, observer), observer, interruptible)
    return result


def extend(
    run_dir: Path, runs: int, observer: RunObserver | None = None, *, interruptible: bool = True
) -> RunResult:
    """Add measured runs to the completed run in ``run_dir`` until it has ``runs`` (what
    ``run --runs auto`` does while the noise is too high): one more warmup pass first, since
    the connections and the target's caches are new, then the missing passes. The runs it
    has are kept as they are; meta.json records the plan as extended."""
    meta = store.recorded_meta(run_dir)
    if meta.get("status") != "completed":
        raise StoreError(
            f"{run_dir} is {meta.get('status')}, not completed: take it up first with "
            f"`perfbench run --resume {run_dir}`"
        )
    spec = RunSpec.of_run(run_dir, meta)
    if runs <= spec.plan.runs:
        raise StoreError(f"{run_dir} has {spec.plan.runs} runs already; ask for more than that")
    plan = replace(spec.plan, runs=runs, warmup=spec.plan.warmup + 1)
    session = Session(replace(spec, plan=plan), observer, run_dir=run_dir, resume=True)
    result: RunResult = _drive(session, observer, interruptible)
    return result


def rerun(
    run_dir: Path, observer: RunObserver | None = None, *, interruptible: bool = True
) -> RunResult:
    """Measure the run in ``run_dir`` again as its meta.json says it was started (``compare
    --confirm``), into a new directory beside it labelled ``<label>-confirm``. It measures the
    target the spec names with the code installed now: for two commits, `perfbench ab`."""
    meta = store.recorded_meta(run_dir)
    spec = RunSpec.of_run(run_dir, meta)
    label = f"{spec.label}-confirm" if spec.label else "confirm"
    again = replace(spec, label=label, out=str(run_dir.parent))
    return run(again, observer, interruptible=interruptible)


def more_runs(
    result: RunResult, wanted: planning.Wanted, observer: RunObserver | None = None
) -> RunResult:
    """``run --runs auto`` after its first batch: extend the run while its own noise says the
    gated timings need more runs to show ``wanted.effect`` (at most ``wanted.max_runs``).
    meta.json's ``runs_auto`` records where it stopped and why."""
    while True:
        if result.run_dir is None or result.meta.get("status") != "completed":
            return result  # interrupted or failed: nothing to extend, the run says why
        verdict = planning.next_runs(result.summary, wanted)
        if verdict.more is None:
            result.meta["runs_auto"] = verdict.to_doc(wanted)
            store.write_json(result.run_dir / store.META, result.meta)
            return result
        result = extend(result.run_dir, verdict.more, observer)


def resumed(run_dir: Path, observer: RunObserver | None = None) -> Session:
    """The session that continues the interrupted run in ``run_dir``."""
    meta = store.recorded_meta(run_dir)
    if meta.get("status") == "completed":
        raise StoreError(f"{run_dir} is complete; nothing to resume")
    spec = RunSpec.of_run(run_dir, meta)
    return Session(spec, observer, run_dir=run_dir, resume=True)


def sweep(spec: SweepSpec, observer: RunObserver | None = None) -> SweepResult:
    """Run ``spec``'s levels into a new sweep directory under ``spec.out``, with sweep.json,
    and sweep.md and the chart rendered from the result (``report.sweep.write``). A signal
    stops it as it stops a run: the level running then ends interrupted, the sweep can be
    resumed."""
    return _sweep(Sweep(spec, observer, publish=sweep_report.write), observer)


def resume_sweep(path: Path, observer: RunObserver | None = None) -> SweepResult:
    """Continue an unfinished sweep: finished levels are read back, not measured again."""
    spec = SweepSpec.from_doc(sweeps.read_plan(path))
    return _sweep(Sweep(spec, observer, path=path, publish=sweep_report.write), observer)


def _sweep(sweeper: Sweep, observer: RunObserver | None = None) -> SweepResult:
    result: SweepResult = _drive(sweeper, observer, interruptible=True)
    return result


def compare(
    baseline: str | Path,
    candidate: str | Path | None = None,
    *,
    rules: Rules | None = None,
    thresholds: Sequence[str | Threshold] = (),
    strict: bool = False,
    force: bool = False,
    confirm: bool = False,
    root: Path = Path("runs"),
) -> Verdict:
    """`perfbench compare`'s verdict on stored runs: ``candidate`` against ``baseline`` (each a
    run directory, name or label, or a pattern whose runs are pooled), by ``rules`` (default:
    the gate's defaults, not perfbench.toml: that is the CLI's), the candidate checked against
    absolute ``thresholds`` ('p95<2s'). Without a candidate, ``baseline`` is checked against
    the thresholds alone. ``force`` compares runs of different suites; ``confirm`` measures a
    regression's two runs again (``rerun``) and keeps it only if it is seen again::

        verdict = api.compare("v1.3.0", "v1.4.0", thresholds=["error_rate<1%"], strict=True)
        if verdict.failed:
            print(verdict.markdown())  # what `perfbench compare` prints

    Raises ``GateError`` for bad thresholds or sides, ``StoreError`` for unreadable runs."""
    rules = rules if rules is not None else Rules()
    limits = [parse_threshold(t) if isinstance(t, str) else t for t in thresholds]
    if candidate is None and not limits:
        raise GateError("give a baseline and a candidate, or one run and --threshold")
    refs = str(baseline), None if candidate is None else str(candidate)
    found = verdict.judge(*refs, rules, limits, strict=strict, force=force, root=root)
    if confirm and found.outcome == "regression" and refs[1] is not None:
        return confirmed(found, (refs[0], refs[1]), rules, root=root)
    return found


def confirmed(
    found: Verdict,
    refs: tuple[str, str],
    rules: Rules,
    observer: RunObserver | None = None,
    *,
    root: Path = Path("runs"),
) -> Verdict:
    """``compare --confirm``: measure both runs of ``found``'s regression again (baseline
    first, ``rerun``: new directories labelled ``<label>-confirm``) and keep the regression
    only if the same metric regresses again; else the verdict is inconclusive."""
    dirs = verdict.run_dirs(refs, root)
    again = [rerun(run_dir, observer) for run_dir in dirs]
    return verdict.reconsider(found, again, rules)


def plan(
    runs: Sequence[str | Path],
    detect: float = 0.1,
    *,
    rules: Rules | None = None,
    chance: float = power.POWER,
    root: Path = Path("runs"),
) -> Needs:
    """`perfbench plan`: the runs a side and the repeats per run `compare` needs to catch a
    relative change of ``detect`` with the chance ``chance``, at the run-to-run noise of
    ``runs`` (directories, names, labels or patterns; A/A runs of the same code are best)::

        needs = api.plan(["aa1", "aa2"], detect=0.1)
        best = needs.cheapest()  # best.plan.runs, best.plan.repeat
        print(needs.markdown())"""
    rules = rules if rules is not None else Rules()
    return needs.needs([str(r) for r in runs], detect, chance, rules, root)


def report(
    runs: Sequence[str | Path],
    *,
    baseline: str | Path | None = None,
    out: Path | None = None,
    rules: Rules | None = None,
    root: Path = Path("runs"),
) -> Path:
    """`perfbench report`: report.md with its charts, and report.html, for stored runs (a
    sweep directory stands for its levels); with ``baseline``, each run's verdict against it
    by ``rules`` first. ``out`` defaults to reports/<the last run's name>. Returns report.md's
    path::

        path = api.report(["v1.3.0", "v1.4.0"], baseline="v1.3.0")"""
    from perfbench.report import release  # matplotlib loads only here

    refs = [str(r) for r in runs]
    base_ref = None if baseline is None else str(baseline)
    with store.reading(*refs, base_ref):
        loaded = [release.load(ref, root) for ref in sweeps.with_levels(refs)]
        base = release.load(base_ref, root) if base_ref else None
        if base is not None:
            loaded = [r for r in loaded if r.path.resolve() != base.path.resolve()]
        last = Path(refs[-1])  # a sweep's report is named after the sweep
        name = last.name if sweeps.is_sweep(last) else loaded[-1].path.name if loaded else ""
        folder = out or Path("reports") / name if loaded else out
        if folder is None:
            raise GateError("give at least one run besides the baseline")
        return release.build(loaded, base, folder, rules)


class _Stoppable(Protocol):
    async def run(self) -> Any: ...
    def stop(self, reason: str | None = None) -> None: ...


def _drive(work: _Stoppable, observer: RunObserver | None, interruptible: bool) -> Any:
    main = threading.current_thread() is threading.main_thread()
    watch = interruptible and main
    return anyio.run(
        _until_stopped if watch else _plain,
        work,
        observer or RunObserver(),
        backend_options=host.loop_options(),
    )


async def _plain(work: _Stoppable, observer: RunObserver) -> Any:
    return await work.run()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
TOGETHER_S = 0.5  # signals this close are one interrupt (`timeout -s INT` sends two at once)


class Hurried(KeyboardInterrupt):
    """A second, later signal cut a stopping run short: its run directory is finalised
    (``interrupted``), its tables are not printed. ``signum``: the signal that did it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Interrupts:
    """What each stop signal means, from when it came (pure: the watcher feeds it).

    The first stops the work cleanly. One within ``TOGETHER_S`` of it is the same interrupt
    sent twice: `timeout -s INT` signals its child, then the child's group, and a second
    Ctrl-C 30 ms after the first had aborted the run with nothing written. A later one is a
    user who will not wait: stop waiting for what is in flight, and still finalise."""

    def __init__(self) -> None:
        self.first: float | None = None

    def meaning(self, at: float) -> str:
        """``stop``, ``same`` (ignore it) or ``hurry``."""
        if self.first is None:
            self.first = at
            return "stop"
        return "same" if at - self.first < TOGETHER_S else "hurry"


async def _until_stopped(work: _Stoppable, observer: RunObserver) -> Any:
    """The first Ctrl-C, or a SIGTERM (``timeout``, a CI job cancelled), stops the work
    cleanly: what was measured is kept and the run ends ``interrupted``. A second, later
    signal of either kind cancels what the stop still waits for (tasks, a target's close,
    workers), finalises the run directory all the same and raises ``Hurried``; a third ends
    the process at once."""
    hurry = anyio.CancelScope()
    hurried: list[int] = []
    interrupts = Interrupts()
    async with anyio.create_task_group() as tg:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                task_status.started()
                async for received in signals:
                    meaning = interrupts.meaning(time.monotonic())
                    if meaning == "stop":
                        observer.stopping()
                        work.stop(signal.Signals(received).name)
                    elif meaning == "hurry":
                        hurried.append(received)
                        hurry.cancel()
                        for each in STOP_SIGNALS:  # a third signal ends the process at once
                            signal.signal(each, signal.SIG_DFL)
                        return

        await tg.start(watch)  # the handler is in place before the first task can start
        result = None
        with hurry:
            result = await work.run()
        # A stop can end the work within milliseconds; the same interrupt's second signal
        # (`timeout -s INT`'s, a double Ctrl-C) must still find this handler, not Python's,
        # which would raise KeyboardInterrupt while the results are printed.
        # A stop that outlasted TOGETHER_S has nothing left to wait for (a negative sleep
        # raised ValueError: a sweep stopped at -c 8 printed a traceback, not its tables).
        if interrupts.first is not None and not hurried:
            await anyio.sleep(max(0.0, interrupts.first + TOGETHER_S - time.monotonic()))
        tg.cancel_scope.cancel()
    if hurry.cancelled_caught:
        raise Hurried(hurried[0])
    return result
