"""meta.json as a typed document: the keys every reader (show, list, compare, report, export,
resume) may rely on, checked by mypy at no runtime cost (a TypedDict is a plain dict). Its
sibling, summary.json, is typed where it is made: ``stats.summary.Summary``.

The key-by-key meaning is in docs/metrics.md; ``schema`` is bumped when a key changes."""

from __future__ import annotations

from typing import Any, TypedDict


class Owner(TypedDict):
    hostname: str
    pid: int


class SuiteInfo(TypedDict):
    name: str
    digest: str
    cases: list[dict[str, Any]]  # id, language, tags, tools, timeout_s


class Meta(TypedDict, total=False):
    schema: int
    id: str | None  # the run directory's name
    status: str  # running, completed, interrupted, failed (readers may also say killed)
    owner: Owner  # which process writes the run, to tell a killed run from a running one
    label: str | None
    started_at: str
    finished_at: str | None
    duration_s: float | None
    resumed: list[str]  # when each --resume took it up
    runs_auto: dict[str, Any]  # run --runs auto: the runs it settled on, and why
    suite: SuiteInfo
    target: str  # the target's key-free name (mock+http:default)
    load: dict[str, Any]  # shape and its figures, for people and for compare's notes
    plan: dict[str, Any]  # the plan as in spec.plan (kept for readers of older runs)
    prices: dict[str, Any]  # where prices came from, priced_as, simulated
    spec: dict[str, Any]  # RunSpec.to_doc(): how to start the run again
    perfbench_version: str
    packages: dict[str, str]
    host: dict[str, Any]
    headline: dict[str, Any] | None  # tasks, ok, p50, p95 (list and show read it)
    error: str  # why a failed run failed
    stopped_by: str  # what interrupted it: SIGINT (Ctrl-C), SIGTERM, a Ray actor lost
    nodes: list[str]  # --ray: where each worker's actor ran (host:node id)
    ray: dict[str, Any]  # --ray: {address, actors, nodes (distinct, once the actors ran)}
