"""What a run is, in one serialisable description: ``RunSpec`` (and ``SweepSpec`` for a sweep,
``TargetSpec`` for what is measured (``targets/target_spec.py``'s record, re-exported
here), ``Plan`` for passes and load).

The CLI builds a spec from its flags (or a library caller builds one); it round-trips through
the run directory (meta.json ``spec``; sweep-plan.json for a sweep), and everything that
starts a run starts from it: ``--resume``, each level of a sweep, each worker process. No key
is ever part of a spec: keys come from the environment, named by ``TargetSpec.api_key_env`` or
the provider's own variable.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfbench.errors import PerfbenchError, StoreError
from perfbench.http.urls import recorded_url
from perfbench.load import Adaptive, Load, Rate
from perfbench.sample import Phase
from perfbench.stats import goodput
from perfbench.stats.goodput import Slo
from perfbench.stats.knee import StopRule
from perfbench.targets.target_spec import Sizing, TargetSpec

if TYPE_CHECKING:
    from perfbench.stats.cost import Pricer
    from perfbench.suite import Suite
    from perfbench.targets import Target

__all__ = ["AUTO_RAMP_PER_SLOT", "Plan", "RunSpec", "SweepPlan", "SweepSpec", "TargetSpec",
           "auto_workers"]  # fmt: skip

PERCENTILE_SLOS = ("p50", "p95", "p99", "mean")  # sweep --slo 'p95<2s': of task latency
AUTO_RAMP_PER_SLOT = 0.001  # seconds between two slot starts in one worker process


@dataclass(frozen=True)
class Plan:
    """Passes and load: ``warmup`` passes, then ``runs`` measured ones, each case ``repeat``
    times a pass, under a load shape (fixed ``concurrency`` when ``load`` is None)."""

    runs: int = 5
    warmup: int = 1
    repeat: int = 1
    concurrency: int = 1  # the fixed closed-loop shape, used when ``load`` is None
    seed: int = 0
    load: Load | None = None
    workers: int = 1  # processes sharing the load (perfbench.engine.fleet); 1 = this process
    # The workers as Ray actors (perfbench.engine.cluster): "local" (a Ray instance started
    # for the run), "auto" (the cluster this machine is in) or a cluster's address; None: as
    # processes of this machine.
    ray: str | None = None
    # Closed loop: seconds over which the task slots of a pass start, evenly; None = auto
    # (ramp_seconds). All at once, the slots' tasks finish together and restart together for
    # the whole pass: each wave of completions queues in the client and is timed late.
    ramp_up: float | None = 0.0
    # Closed loop bounded by time (`-c N --duration S`, k6's habit): the measured runs share
    # these seconds evenly, each cycling over the suite until its share is up (tasks in flight
    # then finish, and count); warmup passes stay one pass over the suite. None: passes of
    # the suite × repeat.
    duration_s: float | None = None
    # Ramping stages (`--stages`, load/stages.py): each measured run follows them, its
    # concurrency the stages' target over time; (seconds, target) each. None: fixed.
    stages: tuple[tuple[float, int], ...] | None = None

    def __post_init__(self) -> None:
        if self.stages is not None:  # from a JSON document: lists
            object.__setattr__(self, "stages", tuple((float(s), int(t)) for s, t in self.stages))

    def pass_seconds(self, phase: Phase) -> float | None:
        """How long a closed-loop pass goes on starting tasks (None: until the suite is done)."""
        if phase != "measured" or self.load_is_open():
            return None
        if self.stages is not None:
            return sum(seconds for seconds, _ in self.stages)
        if self.duration_s is None:
            return None
        return self.duration_s / max(1, self.runs)

    def load_is_open(self) -> bool:
        return isinstance(self.load, Rate)

    def connections(self) -> int:
        """Connections a target's client must keep so that no task waits on its pool: the
        most tasks that can be in flight (0: no limit, an open loop without a cap)."""
        if isinstance(self.load, Adaptive):
            return self.load.maximum
        if isinstance(self.load, Rate):
            return self.load.max_in_flight or 0
        if self.stages is not None:
            return max(self.concurrency, *(target for _, target in self.stages))
        return self.concurrency

    def ramp_seconds(self) -> float:
        """The ramp in seconds; auto starts one slot per millisecond in each worker process,
        slower than one worker gets through tasks (0.25–0.4 ms of CPU each, `perfbench
        calibrate`), so a pass's completions come back spread out rather than in waves."""
        if self.ramp_up is not None:
            return self.ramp_up
        if self.load is not None or self.concurrency <= 1:
            return 0.0
        return AUTO_RAMP_PER_SLOT * self.concurrency / max(1, self.workers)

    def passes(self) -> list[tuple[Phase, int]]:
        warm: list[tuple[Phase, int]] = [("warmup", i) for i in range(self.warmup)]
        return warm + [("measured", i) for i in range(self.runs)]


def auto_workers(plan: Plan, cpus: int | None = None) -> int:
    """``--workers auto``: one worker per 128 tasks in flight (or per 1,000 open-loop tasks/s),
    at most one per core. One worker handles far more than either on this client stack; more
    would only add start-up time and pass barriers."""
    cpus = cpus or os.cpu_count() or 1
    if isinstance(plan.load, Adaptive):
        return 1
    if isinstance(plan.load, Rate):
        wanted = math.ceil(plan.load.per_second / 1000)
    else:
        wanted = math.ceil(plan.concurrency / 128)
    return max(1, min(cpus, wanted))


@dataclass(frozen=True)
class SweepPlan:
    """The levels of a sweep and when to stop; ``base`` is every level's plan, its load
    derived from the level."""

    base: Plan  # runs, warmup, repeat, seed for every level
    levels: tuple[float, ...] = ()  # explicit levels; empty means doubling (auto)
    rates: bool = False  # levels are tasks/s (open loop) rather than concurrency
    max_level: float = 1024
    rule: StopRule = field(default_factory=StopRule)
    bisect_steps: int = 4
    # sweep --slo: ("p95", 2.0), a percentile of task latency at each level; or goodput
    # objectives with the share of tasks that must meet them, ("ttft<500ms,tpot<50ms", 0.9).
    slo: tuple[str, float] | None = None
    workers: int = 0  # processes per level; 0: chosen per level (auto_workers)

    @property
    def objectives(self) -> str | None:
        """The goodput objectives every level's run counts against (None: no --slo, or a
        percentile limit, which needs no counting)."""
        if self.slo is None or self.slo[0] in PERCENTILE_SLOS:
            return None
        return self.slo[0]


def checked_label(label: str) -> str:
    """A run's label as given, refused when it holds a control character: a newline in it
    would start a heading of its own in compare.md (a forged verdict) and break the table
    of `perfbench list`."""
    for at, char in enumerate(label):
        if _CONTROL.match(char):
            raise PerfbenchError(
                f"--label {label!r}: a label is one line of printable text, and character "
                f"{at + 1} is a control character ({char!r}); remove it"
            )
    return label


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class RunSpec:
    """One run: the suite's files, the target, the plan, and where the run directory goes
    (``out``; None: no directory, as calibration runs)."""

    # Case files or folders, absolute; or one "synthetic:SPEC" (`run --synthetic SPEC`): the
    # cases are generated from the spec wherever the spec goes (a worker, --resume, a level).
    cases: tuple[str, ...] = ()
    target: TargetSpec = field(default_factory=TargetSpec)
    plan: Plan = field(default_factory=Plan)
    label: str | None = None
    prices: str | None = None  # the dated price override file, absolute; None: none
    out: str | None = "runs"
    slo: str | None = None  # run --slo "ttft<500ms,tpot<50ms": goodput is counted against it
    scenario: str | None = None  # run --scenario mlperf-server: the run is stamped VALID/INVALID
    # run --server-metrics URL: the target's Prometheus page, read every scrape_interval s.
    server_metrics: str | None = None
    scrape_interval: float = 1.0

    @classmethod
    def build(
        cls,
        cases: Sequence[Path | str],
        target: TargetSpec,
        plan: Plan,
        *,
        label: str | None = None,
        prices: Path | None = None,
        out: Path | None = Path("runs"),
        slo: str | None = None,
        server_metrics: str | None = None,
        scrape_interval: float = 1.0,
        scenario: str | None = None,
    ) -> RunSpec:
        """A spec from what a user gave: paths made absolute (a resumed run may start from
        another folder), the working directory's price file taken now if none is named."""
        return cls(
            cases=tuple(_case_source(c) for c in cases),
            target=target,
            plan=plan,
            label=None if label is None else checked_label(label),
            prices=_prices(prices),
            out=None if out is None else str(out),
            slo=slo,
            server_metrics=server_metrics,
            scrape_interval=scrape_interval,
            scenario=scenario,
        )

    def load_suite(self) -> Suite:
        from perfbench.suite import load_suite, synthetic_suite, trace_suite

        generated = [c for c in self.cases if c.startswith((SYNTHETIC, TRACE))]
        if not generated:
            return load_suite([Path(c) for c in self.cases])
        if len(self.cases) > 1:
            raise PerfbenchError("give one of case files, --synthetic or a shaped --trace")
        if generated[0].startswith(TRACE):
            return trace_suite(Path(generated[0].removeprefix(TRACE)))
        return synthetic_suite(generated[0].removeprefix(SYNTHETIC))

    def pricer(self) -> Pricer:
        from perfbench.stats.cost import load_pricer

        return load_pricer(Path(self.prices) if self.prices else None, default=False)

    def build_target(self, server_url: str | None = None) -> Target:
        """The target, with clients for the plan's connections; ``server_url``: a mock server
        already running. Only here and in worker processes: reading a spec builds nothing."""
        from perfbench.targets.registry import resolve

        return resolve(self.target, Sizing(self.plan.connections(), self.plan.seed, server_url))

    def to_doc(self) -> dict[str, Any]:
        """The spec as JSON (meta.json ``spec``)."""
        return {
            "cases": list(self.cases),
            "target": self.target.to_doc(),
            "plan": _plan_doc(self.plan),
            "label": self.label,
            "prices": self.prices,
            "out": self.out,
            "slo": self.slo,
            "server_metrics": recorded_url(self.server_metrics) if self.server_metrics else None,
            "scrape_interval": self.scrape_interval,
            **({"scenario": self.scenario} if self.scenario else {}),
        }

    def objectives(self) -> Slo | None:
        """The parsed --slo (checked when the spec is built by the CLI, again here)."""
        return goodput.parse(self.slo) if self.slo else None

    def stamp(self, summary: Mapping[str, Any]) -> dict[str, Any]:
        """The run's stamp by the rules of its ``scenario`` (stats/scenario.py)."""
        from perfbench.stats.scenario import SCENARIOS, stamp

        assert self.scenario is not None
        runs, pooled = summary["runs"], summary["pooled"]["overall"]
        return stamp(SCENARIOS[self.scenario], runs, pooled, self.plan.load, self.objectives())

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> RunSpec:
        return cls(
            cases=tuple(doc["cases"]),
            target=_target_spec(doc["target"]),
            plan=_plan(doc["plan"]),
            label=doc.get("label"),
            prices=doc.get("prices"),
            out=doc.get("out"),
            slo=doc.get("slo"),
            server_metrics=doc.get("server_metrics"),
            scrape_interval=doc.get("scrape_interval", 1.0),
            scenario=doc.get("scenario"),
        )

    @classmethod
    def of_run(cls, run_dir: Path, meta: Mapping[str, Any]) -> RunSpec:
        """How the run in ``run_dir`` was started, from its meta.json (also from a run made by
        perfbench before specs were recorded, whose meta.json has an ``invocation``)."""
        if "spec" in meta:
            return cls.from_doc(meta["spec"])
        how = meta.get("invocation")
        if not how:
            raise StoreError(f"{run_dir} does not record how it was started; it cannot resume")
        plan_doc = {**meta["plan"], "load": _legacy_load(meta)}
        return cls(
            cases=tuple(how["cases"]),
            target=_target_spec({**how["options"], "target": how["target"]}),
            plan=_plan(plan_doc),
            label=meta.get("label"),
            prices=how.get("prices"),
            out=str(run_dir.parent),
        )


@dataclass(frozen=True)
class SweepSpec:
    """A sweep: the suite, the target, the levels, and where its directory goes."""

    cases: tuple[str, ...] = ()
    target: TargetSpec = field(default_factory=TargetSpec)
    plan: SweepPlan = field(default_factory=lambda: SweepPlan(Plan(runs=3)))
    label: str | None = None
    prices: str | None = None
    out: str = "runs"
    server_metrics: str | None = None  # every level's run reads it (RunSpec.server_metrics)
    scrape_interval: float = 1.0

    @classmethod
    def of(cls, run: RunSpec, plan: SweepPlan) -> SweepSpec:
        """The sweep of ``plan``'s levels over what ``run`` describes (its own plan aside)."""
        return cls(run.cases, run.target, plan, run.label, run.prices, run.out or "runs",
                   run.server_metrics, run.scrape_interval)  # fmt: skip

    def level(self, level: float, *, workers: bool = True) -> RunSpec:
        """The run of one level: the base plan at that concurrency or rate, with worker
        processes chosen for it (``workers=False``: one process)."""
        base = self.plan.base
        if self.plan.rates:
            plan = replace(base, load=Rate(per_second=level))
        else:
            plan = replace(base, concurrency=int(level), load=None)
        # On a Ray cluster, auto stays 0: the run settles it from the cluster's CPUs.
        cluster = plan.ray not in (None, "local")
        count = (self.plan.workers or (0 if cluster else auto_workers(plan))) if workers else 1
        plan = replace(plan, workers=count)
        return RunSpec(self.cases, self.target, plan, self.label, self.prices, self.out,
                       slo=self.plan.objectives, server_metrics=self.server_metrics,
                       scrape_interval=self.scrape_interval)  # fmt: skip

    def load_suite(self) -> Suite:
        return RunSpec(self.cases).load_suite()

    def to_doc(self) -> dict[str, Any]:
        """The spec as JSON (sweep-plan.json)."""
        plan = asdict(self.plan)
        plan["base"] = _plan_doc(self.plan.base)
        plan["base"].pop("load", None)  # a level's load is derived from the level
        return {
            "cases": list(self.cases),
            "target": self.target.to_doc(),
            "plan": plan,
            "label": self.label,
            "prices": self.prices,
            "out": self.out,
            "server_metrics": recorded_url(self.server_metrics) if self.server_metrics else None,
            "scrape_interval": self.scrape_interval,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> SweepSpec:
        """From sweep-plan.json (also one written before specs, with ``options``)."""
        if "options" in doc:  # perfbench before specs: the target's options apart
            target = TargetSpec(doc["target"], doc["options"]["base_url"],
                                doc["options"]["api_key_env"])  # fmt: skip
            base = {**doc["plan"]["base"], "seed": doc["options"]["seed"]}
        else:
            target = _target_spec(doc["target"])
            base = doc["plan"]["base"]
        plan = doc["plan"]
        return cls(
            cases=tuple(doc["cases"]),
            target=target,
            plan=SweepPlan(
                base=_plan({**base, "load": None}),
                levels=tuple(plan["levels"]),
                rates=plan["rates"],
                max_level=plan["max_level"],
                rule=StopRule(**plan["rule"]),
                bisect_steps=plan["bisect_steps"],
                slo=(plan["slo"][0], plan["slo"][1]) if plan["slo"] else None,
                workers=plan.get("workers", 0),  # absent from sweeps started before workers
            ),
            label=doc.get("label"),
            prices=doc.get("prices"),
            out=doc.get("out") or "runs",
            # .get: absent from sweeps started before sweep --server-metrics
            server_metrics=doc.get("server_metrics"),
            scrape_interval=doc.get("scrape_interval", 1.0),
        )


SYNTHETIC = "synthetic:"  # a case source that is a generator's spec, not a file
TRACE = "trace:"  # cases shaped by a trace's lines (`run --trace FILE` without cases)


def _case_source(given: Path | str) -> str:
    text = str(given)
    if text.startswith(TRACE):
        return TRACE + str(Path(text.removeprefix(TRACE)).resolve())
    return text if text.startswith(SYNTHETIC) else str(Path(given).resolve())


def _prices(path: Path | None) -> str | None:
    """The override file to use: the one named, else the working directory's, if any."""
    from perfbench.stats.cost import OVERRIDES

    if path is not None:
        return str(path.resolve())
    default = Path(OVERRIDES)
    return str(default.resolve()) if default.is_file() else None


def _target_spec(doc: Mapping[str, Any]) -> TargetSpec:
    known = {f.name for f in fields(TargetSpec)}
    # JSON has no tuples: a list read back is one (headers), so the spec compares equal.
    values: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k in known
    }
    return TargetSpec(**values)


def _plan_doc(plan: Plan) -> dict[str, Any]:
    doc = asdict(plan)
    if plan.load is not None:
        shape = "adaptive" if isinstance(plan.load, Adaptive) else "rate"
        doc["load"] = {"shape": shape, **asdict(plan.load)}
    return doc


def _plan(doc: Mapping[str, Any]) -> Plan:
    load = doc.get("load")
    shape: Load | None = None
    if load:
        values = {k: v for k, v in load.items() if k != "shape"}
        shape = Adaptive(**values) if load["shape"] == "adaptive" else Rate(**values)
    known = {f.name for f in fields(Plan)} - {"load"}
    return Plan(**{k: v for k, v in doc.items() if k in known}, load=shape)


def _legacy_load(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    load = meta["plan"].get("load")
    return {"shape": meta["load"]["shape"], **load} if load else None
