"""One benchmark run end to end: run directory, engine, recorder, statistics, final status.

A ``Session`` carries out a ``RunSpec`` (``perfbench.api.run`` makes one); it owns the run
directory's lifecycle so that whatever happens, meta.json ends with a truthful status and
summary.json describes every sample that reached samples.jsonl."""

from __future__ import annotations

from contextlib import AsyncExitStack, suppress
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import anyio

from perfbench import host, store
from perfbench.clock import Clock, default_clock
from perfbench.engine.cluster import Cluster, sized
from perfbench.engine.fleet import Fleet
from perfbench.engine.observer import RunObserver, wants
from perfbench.engine.results import RunResult
from perfbench.engine.resume import Resume
from perfbench.engine.runner import Outcome, Runner
from perfbench.engine.scraper import Scraper
from perfbench.errors import PerfbenchError, StoreError, reason
from perfbench.load import Adaptive, Rate
from perfbench.sample import Sample
from perfbench.spec import Plan, RunSpec
from perfbench.stats.cost import Pricer, price
from perfbench.stats.headroom import headroom
from perfbench.stats.summary import Summarizer, Summary, headline
from perfbench.store import machine
from perfbench.store.documents import (
    BarePlanDoc,
    Headline,
    Host,
    LoadInfo,
    Meta,
    Prices,
    SpecDoc,
    SuiteCase,
    SuiteInfo,
)
from perfbench.store.recorder import Recorder
from perfbench.suite import Brief, Suite
from perfbench.targets import Target, open_target
from perfbench.targets.registry import path_kind
from perfbench.version import __version__

SCHEMA = 1


class Session:
    """One run of ``spec``. The suite and target are built from the spec unless given (a
    library caller's own target; worker processes rebuild theirs from the spec, so a given
    target runs in this process only). ``run_dir`` is an exact directory instead of a new one
    under ``spec.out`` (a sweep's level); with ``resume`` it holds an interrupted run to take
    up: its finished tasks are kept and only the rest run. ``server_url``: a mock server
    already running, which a ``mock+http`` target uses instead of starting its own."""

    def __init__(
        self,
        spec: RunSpec,
        observer: RunObserver | None = None,
        *,
        suite: Suite | None = None,
        target: Target | None = None,
        run_dir: Path | None = None,
        resume: bool = False,
        pricer: Pricer | None = None,
        server_url: str | None = None,
        clock: Clock = default_clock,
    ) -> None:
        # --ray: a cluster's --workers auto is settled when it is joined, here (sized).
        self.cluster = Cluster(spec.plan.ray) if spec.plan.ray is not None else None
        if self.cluster is not None:
            spec = sized(spec, self.cluster)
        self.spec, self.plan = spec, spec.plan
        self.observer = observer or RunObserver()
        self.suite = suite if suite is not None else spec.load_suite()
        if target is not None and (spec.plan.workers > 1 or spec.plan.ray is not None):
            raise PerfbenchError(
                "worker processes build their target from the spec's target string: give "
                "the target as a string (TargetSpec), or run in one process (workers=1)"
            )
        self.target = target if target is not None else spec.build_target(server_url)
        self.target.check(self.suite)  # a suite it cannot run is refused before anything runs
        self.run_dir = run_dir  # an exact directory (a sweep's level) instead of a new name
        self.summarizer = Summarizer(self.suite.timeouts(), spec.objectives())
        self.pricer = pricer if pricer is not None else spec.pricer()
        self.price_ref = self.target.price_ref
        watch = [self.observer.sample] if self.observer.wants_samples() else []
        self.recorder = Recorder(self.summarizer, observers=watch, price=self._price)
        # Checked before any task runs (and outside the event loop, so errors stay plain).
        self._resume_meta: Meta | None = None
        self.resume = Resume()
        self._lock: store.Lock | None = None  # held from here, or from run(), to run()'s end
        if resume and run_dir is not None:
            self._lock = store.lock(run_dir, f"perfbench run --resume {run_dir}")
            try:
                self._resume_meta, self.resume = self._resumed(run_dir)
            except BaseException:
                self._lock.release()
                raise
        self._clock = clock
        self.engine = self._engine(clock)
        self.stopped_by: str | None = None
        self._stopping = False  # stop() was called
        self.scraper: Scraper | None = None  # --server-metrics, made when the run starts

    def _engine(self, clock: Clock) -> Runner | Fleet:
        on_pass = self.observer.pass_started if wants(self.observer, "pass_started") else None
        if self.plan.workers > 1 or self.plan.ray is not None:
            return Fleet(
                self.spec,
                self.suite,
                self.target,
                self.recorder,
                pricer=self.pricer,
                price_ref=self.price_ref,
                on_pass=on_pass,
                resume=self.resume,
                cluster=self.cluster,
            )
        return Runner(
            self.suite,
            self.target,
            self.plan,
            self.recorder,
            clock=clock,
            on_pass=on_pass,
            resume=self.resume,
            max_wait_s=self.spec.target.max_retry_wait,
        )

    def stop(self, reason: str | None = None) -> None:
        """End the run: tasks in flight are cancelled and recorded as such, and the run ends
        ``interrupted`` (``reason``, e.g. the signal, goes into meta.json ``stopped_by``)."""
        self.stopped_by, self._stopping = reason, True
        self.engine.stop()

    def planned_tasks(self) -> int:
        """Tasks this session will run: every pass's tasks, less those a resumed run has."""
        plan = self.plan
        per_pass = self.suite.per_pass(plan.repeat)
        if plan.pass_seconds("measured") is not None:
            return 0  # as many as the time allows: no count, no ETA
        if isinstance(plan.load, Rate):
            per_pass = plan.load.count(per_pass)
        return max(0, len(plan.passes()) * per_pass - len(self.resume.done))

    def _price(self, sample: Sample) -> float | None:
        return price(self.pricer, self.price_ref, self.target.simulated, sample)

    async def run(self) -> RunResult:
        try:
            return await self._run()
        finally:
            if self._lock is not None:
                self._lock.release()

    async def _run(self) -> RunResult:
        started = datetime.now(UTC)
        if self._resume_meta is not None:
            run_dir: Path | None = self.run_dir
            meta = self._resume_meta
        else:
            run_dir = self._create_dir(started)
            meta = self._meta(run_dir, started)
        if run_dir is not None:
            self._open(run_dir, meta)
        note = self.resume.note(self.plan)
        if note is not None:
            self.observer.resuming(note)
        self.observer.controls(self.stop)
        self.observer.run_started(meta, self.planned_tasks(), self.engine)
        status = "failed"
        raising = True  # until the engine returns: then a failed write is the error to report
        refused = False  # the pre-flight check refused the target: nothing was measured
        try:
            async with AsyncExitStack() as stack:
                await open_target(self.target, stack)
                if self.spec.target.preflight:  # a target that is down fails the run now
                    refused = True
                    await self.target.preflight()
                    refused = False
                self.pricer.prepare(self.price_ref)  # before the first task, not in it
                outcome = await self._measure(run_dir)
            status = "interrupted" if outcome.interrupted else "completed"
            meta["duration_s"] = outcome.finished - outcome.started
            raising = False
        except KeyboardInterrupt:  # a Ctrl-C that reached Python's own handler
            status = "interrupted"
            raise
        except anyio.get_cancelled_exc_class() as exc:
            if self._stopping:  # a second Ctrl-C cut the stop short: still an interrupted run
                status = "interrupted"
            else:
                meta["error"] = reason(exc)
            raise
        except BaseException as exc:  # the reason stays with the run (disk full, a bug…)
            meta["error"] = reason(exc)
            if refused:  # `perfbench list` shows it as such, not as a failed measurement
                status = "refused"
            raise
        finally:
            # Runs on success, Ctrl-C and crashes alike: what was measured is summarised.
            summary = self.summarizer.finish()
            if self.spec.scenario:
                summary["scenario"] = self.spec.stamp(summary)
            client = self.engine.client_summary()
            if client is not None:
                summary["client"] = client
                client["headroom"] = self._headroom(summary)
            if self.scraper is not None:
                summary["server_metrics"] = self.scraper.summary()
            aimd = self.engine.aimd
            if aimd is not None:
                summary["adaptive"] = aimd.reading()
            meta["status"] = status
            if self.suite.streamed is not None:  # a failed run's cases are not made for it
                meta["suite"] = self._suite_doc(ended=status == "completed")
            if isinstance(self.engine, Fleet):
                self.stopped_by = self.stopped_by or self.engine.lost
                if self.engine.nodes:
                    meta["nodes"] = self.engine.nodes  # where each Ray actor ran
                    if "ray" in meta:
                        meta["ray"]["nodes"] = len(set(self.engine.nodes))
            if status == "interrupted" and self.stopped_by:
                meta["stopped_by"] = self.stopped_by
            meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
            meta["headline"] = cast(Headline, headline(summary))
            if run_dir is not None and self.recorder.writer is not None:
                self.recorder.writer.close()
                _record_end(run_dir, summary, meta, raising)
            result = RunResult(run_dir, meta, summary)
            self.observer.run_finished(result)
        return result

    async def _measure(self, run_dir: Path | None) -> Outcome:
        """The engine's run, samples.jsonl flushed beside it (every ``store.FLUSH_S``) and the
        server's metrics read (--server-metrics); the last samples flushed at its end, where
        a failed write is the run's error."""
        writer = self.recorder.writer
        url = self.spec.server_metrics
        async with anyio.create_task_group() as tg:
            if isinstance(writer, store.SampleWriter):
                tg.start_soon(writer.flush_every)
            if url is not None:
                out = run_dir / store.SERVER_METRICS if run_dir is not None else None
                offset = self.resume.clock_offset
                self.scraper = Scraper(url, self.spec.scrape_interval, out, self._clock, offset)
                tg.start_soon(self.scraper.run)
            outcome = await self.engine.run()
            tg.cancel_scope.cancel()  # the last scrape is the one before the tasks ended
            if isinstance(writer, store.SampleWriter):
                writer.flush()
        return outcome

    def _headroom(self, summary: Summary) -> dict[str, Any] | None:
        """How much of this machine's calibrated ceiling the run used (None: not calibrated).
        HTTP targets only: an in-process target's own work is the client's, so there is no
        fixed ceiling to compare with; the CPU and loop-lag warnings cover it."""
        if path_kind(self.spec.target.target) != "http":
            return None
        ceiling = machine.load().get("http")
        if ceiling is None:
            return None
        return headroom(summary, self.plan.workers, ceiling)

    def _resumed(self, run_dir: Path) -> tuple[Meta, Resume]:
        """Take up an interrupted run (its lock held): keep every finished task, run only the
        rest."""
        store.remove_strays(run_dir)  # temp files of a process killed while writing one
        meta = store.recorded_meta(run_dir)
        # "": a streamed suite's run stopped before its digest was known; its spec, which
        # this run takes up, makes the same cases.
        if meta["suite"]["digest"] not in ("", self.suite.digest):
            raise StoreError(
                f"{run_dir} was measured with another version of the suite (digest "
                f"{meta['suite']['digest'][:12]}, now {self.suite.digest[:12]}); start a new run"
            )
        resume = Resume.read(run_dir, self.suite, self.plan, self.summarizer.add)
        meta["status"] = "running"
        meta["owner"] = store.owner()
        # The plan as it runs now: the same as started, unless `api.extend` added runs.
        meta["spec"], meta["plan"] = _spec_doc(self.spec), _plan_doc(self.plan)
        meta.setdefault("resumed", []).append(datetime.now(UTC).isoformat(timespec="seconds"))
        return meta, resume

    def _create_dir(self, started: datetime) -> Path | None:
        if self.run_dir is not None:
            store.make_dir(self.run_dir)
            path = self.run_dir
        elif self.spec.out is None:
            return None
        else:
            path = store.new_run_dir(
                Path(self.spec.out), self.suite.name, self.target.name, self.spec.label, started
            )
        # Before meta.json exists: a `--resume` of this directory must wait for this run.
        self._lock = store.lock(path, f"perfbench run --resume {path}")
        return path

    def _open(self, run_dir: Path, meta: Meta) -> None:
        """The run's reserve of disk space, meta.json as the run starts, and samples.jsonl
        opened for appending. The reserve comes first: on a nearly full disk the first
        meta.json fits and the last, which says how the run ended, would not."""
        reserve = store.Reserve(run_dir)
        try:
            reserve.make(meta)
            store.write_json(run_dir / store.META, meta)
        except StoreError as exc:
            reserve.free()
            if self._resume_meta is not None:  # its meta.json, untouched, still says how it ended
                raise StoreError(
                    f"{exc}. Nothing was measured: fix the cause, then resume again"
                ) from exc
            self._discard(run_dir)
            raise StoreError(f"{exc}. Nothing was measured: fix the cause, then run again") from exc
        self.recorder.writer = store.SampleWriter(run_dir / store.SAMPLES)

    def _discard(self, run_dir: Path) -> None:
        """Remove a run directory that never held a meta.json (the run could not start), so
        that no folder without a run is left for `list` and `show` to stumble on."""
        if self._lock is not None:
            self._lock.release()
        with suppress(OSError):
            run_dir.rmdir()  # empty once the lock is gone; anything else in it stays

    def _suite_doc(self, *, ended: bool) -> SuiteInfo:
        """meta.json's suite. A streamed suite's digest and case list are known once its
        cases have all been made: "" and those made so far as the run starts (none) and in a
        run that ended otherwise before then (``ended`` False), filled as a completed run
        ends; made then when the run did not read them all (a ``--duration`` run's)."""
        suite, streamed = self.suite, self.suite.streamed
        if streamed is not None and not ended and streamed.digest is None:
            cases = [_case_doc(brief) for brief in streamed.partial]  # those made so far
            return {"name": suite.name, "digest": "", "cases": cases}
        cases = [_case_doc(brief) for brief in suite.briefs()]
        return {"name": suite.name, "digest": suite.digest, "cases": cases}

    def _meta(self, run_dir: Path | None, started: datetime) -> Meta:
        meta: Meta = {
            "schema": SCHEMA,
            "id": run_dir.name if run_dir else None,
            "status": "running",
            "owner": store.owner(),
            "label": self.spec.label,
            "started_at": started.isoformat(timespec="seconds"),
            "finished_at": None,
            "duration_s": None,
            "suite": self._suite_doc(ended=False),
            "target": self.target.name,
            "load": _load(self.plan),
            "plan": _plan_doc(self.plan),
            "prices": cast(
                Prices,
                {
                    **self.pricer.source(),
                    "priced_as": self.price_ref,
                    "simulated": self.target.simulated,
                },
            ),
            "spec": _spec_doc(self.spec),
            "perfbench_version": __version__,
            "packages": host.package_versions(),
            "host": cast(Host, host.fingerprint()),
            "headline": None,
        }
        if self.plan.ray:  # said where the run is described (nodes filled in once the actors run)
            meta["ray"] = {"address": self.plan.ray, "actors": self.plan.workers}
        return meta


def _case_doc(case: Brief) -> SuiteCase:
    doc: SuiteCase = {
        "id": case.id,
        "language": case.language,
        "tags": case.tags,
        "tools": case.tools,
        "timeout_s": case.timeout_s,
    }
    if case.output_tokens:  # a generated workload's asked output length (advice checks it)
        doc["output_tokens"] = case.output_tokens
    return doc


# The spec's, the plan's, the prices' and the host's documents are made below the store's types
# (spec, dataclasses, stats, host): meta.json's reader (store.documents.check_meta) is what
# holds them to those types.
def _spec_doc(spec: RunSpec) -> SpecDoc:
    return cast(SpecDoc, spec.to_doc())


def _plan_doc(plan: Plan) -> BarePlanDoc:
    return cast(BarePlanDoc, asdict(plan))


def _record_end(run_dir: Path, summary: Summary, meta: Meta, raising: bool) -> None:
    """summary.json, then meta.json with how the run ended. The summary is derived data (it
    can be rebuilt from samples.jsonl): on a full disk it must not stop meta.json from being
    written. When the run is already ending on an error (``raising``; a full disk, most
    often), that error, with its resume hint, is the one to report: a meta.json that cannot
    be written stays ``running``, which readers call killed once this process is gone, and
    --resume takes it up alike. The run's reserve (``store.Reserve``) is freed for meta.json
    when the disk is full, so that seldom happens."""
    reserve = store.Reserve(run_dir)
    with suppress(StoreError):
        store.write_summary(run_dir, summary)
    try:
        try:
            store.write_json(run_dir / store.META, meta)
        except StoreError:
            if not reserve.free():  # the room kept back for this very write
                raise
            store.write_json(run_dir / store.META, meta)
    except StoreError as exc:
        if raising:
            return
        raise StoreError(
            f"{exc}. meta.json still says the run is running (`perfbench show` calls it "
            f"killed once this process ends); what was measured is kept in samples.jsonl: "
            f"fix the cause, then `perfbench run --resume {run_dir}`"
        ) from exc.__cause__
    finally:
        reserve.free()


def _load(plan: Plan) -> LoadInfo:
    shape = plan.load
    load: dict[str, Any]
    if shape is None:
        load = {
            "shape": "fixed",
            "concurrency": plan.concurrency,
            "ramp_up_s": round(plan.ramp_seconds(), 6),
        }
    else:
        load = {"shape": "adaptive" if isinstance(shape, Adaptive) else "rate", **asdict(shape)}
    if plan.duration_s is not None:
        load["duration_s"] = plan.duration_s
    if plan.stages is not None:
        load["stages"] = [list(stage) for stage in plan.stages]
    return cast(LoadInfo, load)
