"""Run directories on disk: the only package that reads and writes them.

runs/<UTC time>_<suite>_<target>[_<label>]/
    meta.json      the run's spec, status, timings and headline; replaced atomically
    samples.jsonl  one Sample a line, appended and flushed as each task ends
    summary.json   statistics with encoded HDR histograms (written when the run ends)
    cases.jsonl    a run of more than 1,000 cases: its per-case figures, a line a case
    server_metrics.jsonl   run --server-metrics only: the server's Prometheus page, a scrape a line

This module names, lists, finds and reads run directories; ``files`` writes their documents,
``recorder`` is the sink samples go to, ``sweeps`` lays out sweep directories and ``machine``
keeps the per-machine calibration."""

from __future__ import annotations

import fnmatch
import os
import re
import socket
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfbench.errors import StoreError
from perfbench.sample import Sample
from perfbench.store.cases import CASES
from perfbench.store.documents import Meta, Owner
from perfbench.store.files import (
    META,
    SAMPLES,
    SERVER_METRICS,
    SUMMARY,
    Reserve,
    SampleWriter,
    read_json,
    read_samples,
    read_server_metrics,
    remove_strays,
    rewrite_samples,
    write_json,
    write_summary,
)
from perfbench.store.lock import Lock, lock
from perfbench.store.tasks import TaskKey, TaskSet

if TYPE_CHECKING:
    from perfbench.stats.summary import Summary

OWN_FILES = (META, SAMPLES, SUMMARY, CASES)  # what an export never writes over

__all__ = [
    "CASES",
    "META",
    "OWN_FILES",
    "SAMPLES",
    "SERVER_METRICS",
    "SUMMARY",
    "Lock",
    "Meta",
    "Reserve",
    "RunInfo",
    "SampleWriter",
    "TaskKey",
    "TaskSet",
    "list_runs",
    "lock",
    "make_dir",
    "match_runs",
    "new_run_dir",
    "owner",
    "read_json",
    "read_meta",
    "read_samples",
    "read_server_metrics",
    "read_summary",
    "reading",
    "recorded_meta",
    "remove_strays",
    "resolve_run",
    "rewrite_samples",
    "scan_runs",
    "status",
    "write_json",
    "write_summary",
]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:40] or "x"


def new_run_dir(root: Path, suite: str, target: str, label: str | None, now: datetime) -> Path:
    """Create a fresh, uniquely named run directory under ``root``."""
    parts = [now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ"), _slug(suite), _slug(target)]
    if label:
        parts.append(_slug(label))
    base = "_".join(parts)
    try:
        root.mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000):
            path = root / (base if n == 1 else f"{base}-{n}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:
        raise StoreError(f"cannot create a run directory in {root}: {exc.strerror}") from exc
    raise StoreError(f"too many run directories named {base} in {root}")


def make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=False)
    except FileExistsError as exc:
        raise StoreError(f"{path} exists already; choose another --out") from exc
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror}") from exc


@dataclass(frozen=True)
class RunInfo:
    path: Path
    meta: Meta


def list_runs(root: Path) -> list[RunInfo]:
    """Every run directory under ``root`` with a sound meta.json, oldest first."""
    return scan_runs(root)[0]


def scan_runs(root: Path) -> tuple[list[RunInfo], list[StoreError]]:
    """The run directories under ``root`` (oldest first), and why each one whose meta.json is
    damaged was left out: a damaged directory is not a run, but ``list`` says it is there."""
    if not root.is_dir():
        return [], []
    runs, damaged = [], []
    for meta in sorted(root.glob(f"*/{META}")):
        try:
            runs.append(RunInfo(meta.parent, recorded_meta(meta.parent)))
        except StoreError as exc:
            damaged.append(exc)
    return runs, damaged


def resolve_run(ref: str, root: Path) -> Path:
    """A run directory from a path, or from a name or label under ``root``; the newest wins."""
    path = Path(ref)
    if (path / META).is_file():
        return path
    matches = [r.path for r in list_runs(root) if r.path.name == ref or r.meta.get("label") == ref]
    if matches:
        return matches[-1]
    if (root / ref / META).is_file():
        return root / ref  # its meta.json is damaged: reading it says how
    raise StoreError(f"no run '{ref}': not a run directory, nor a name or label in {root}/")


@contextmanager
def reading(*runs: str | Path | None) -> Iterator[None]:
    """A reader of ``runs`` (references or directories) ends with a ``StoreError`` rather
    than a traceback when their files hold what the checks (``store.checks``) do not look at,
    such as a key renamed deep inside summary.json: the error names the runs and the fault."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        names = ", ".join(str(r) for r in runs if r is not None)
        raise StoreError(
            f"cannot read {names}: unexpected content ({type(exc).__name__}: {exc}). A file "
            f"of the run is damaged or from another perfbench version: `perfbench show` each "
            f"run to find it; a summary.json deleted is recomputed from samples.jsonl"
        ) from exc


def match_runs(pattern: str, root: Path) -> list[Path]:
    """Every run under ``root`` whose name or label matches the shell pattern, oldest first."""
    return [
        r.path
        for r in list_runs(root)
        if fnmatch.fnmatchcase(r.path.name, pattern)
        or fnmatch.fnmatchcase(str(r.meta.get("label") or ""), pattern)
    ]


def read_summary(run_dir: Path, meta: Mapping[str, Any]) -> Summary:
    """A run's summary.json; for a run killed before writing one, the summary recomputed from
    samples.jsonl (what was measured counts, a torn last line is dropped)."""
    if (run_dir / SUMMARY).is_file():
        summary: Summary = read_json(run_dir / SUMMARY)
        return summary
    from perfbench.stats.goodput import parse
    from perfbench.stats.summary import (
        summarize,  # only here: stats is not needed to write a run
    )

    timeouts = {c["id"]: c["timeout_s"] for c in meta["suite"]["cases"]}
    slo = (meta.get("spec") or {}).get("slo")
    samples = unique_samples(run_dir, timeouts)
    summary = summarize(samples, timeouts, parse(slo) if slo else None)
    if (meta.get("spec") or {}).get("scenario"):  # run --scenario: its stamp, made again
        from perfbench.spec import RunSpec

        summary["scenario"] = RunSpec.from_doc(meta["spec"]).stamp(summary)
    return summary


def unique_samples(run_dir: Path, cases: Iterable[str] = ()) -> Iterator[Sample]:
    """``read_samples`` with each task once, as ``--resume`` keeps it (``unique``)."""
    return unique(read_samples(run_dir), cases)


def unique(samples: Iterable[Sample], cases: Iterable[str] = ()) -> Iterator[Sample]:
    """Each task once, its first line kept: a line found twice (pasted twice, or appended by
    two processes before run directories were locked) would otherwise count twice in every
    statistic. A task cancelled by a Ctrl-C and run again on ``--resume`` has two lines, the
    cancelled attempt (kept for the 429s it was answered) and the finished one: both count.
    ``cases``, the run's case ids, lets the tasks seen be kept as bits (``TaskSet``): a
    million samples read back no longer hold a million keys."""
    names = list(cases)
    finished, cancelled = TaskSet(names), TaskSet(names)
    for sample in samples:
        seen = cancelled if sample.status == "cancelled" else finished
        if seen.add(sample.key):
            yield sample


def owner() -> Owner:
    """Which process is writing a run (machine and pid), so a reader can tell a run that is
    still going from one whose process was killed."""
    return {"hostname": socket.gethostname(), "pid": os.getpid()}


def recorded_meta(run_dir: Path) -> Meta:
    """A run's meta.json as written (checked: ``documents.check_meta``), its status as
    recorded: for the run's writers (resume, extend) and readers that need no more."""
    meta: Meta = read_json(run_dir / META)
    return meta


def read_meta(run_dir: Path) -> Meta:
    """A run's meta.json for readers (show, compare, report): its status as ``status`` tells
    it, so a run whose process was killed is not called running."""
    meta = recorded_meta(run_dir)
    meta["status"] = status(meta)
    return meta


def status(meta: Mapping[str, Any]) -> str:
    """The run's status for people: a run still marked running whose process is gone from
    this machine was killed, and is said to be so."""
    recorded = str(meta.get("status", "?"))
    who = meta.get("owner") or {}
    if recorded != "running" or who.get("hostname") != socket.gethostname():
        return recorded
    try:
        os.kill(int(who["pid"]), 0)
    except ProcessLookupError:
        return "killed"
    except (OSError, KeyError, TypeError, ValueError):
        return recorded
    return recorded
