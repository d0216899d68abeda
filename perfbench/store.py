"""Run directories on disk: the only module that reads and writes them.

runs/<UTC time>_<suite>_<target>[_<label>]/
    meta.json      the run's spec, status, timings and headline; replaced atomically
    samples.jsonl  one Sample a line, appended and flushed as each task ends
    summary.json   statistics with encoded HDR histograms (written when the run ends)
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from perfbench.errors import StoreError
from perfbench.sample import Sample

META = "meta.json"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"


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


def write_json(path: Path, doc: Any) -> None:
    """Write JSON atomically: a temp file in the same folder, fsynced, then renamed over."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False, sort_keys=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror}") from exc


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise StoreError(f"{path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc


class SampleWriter:
    """Appends samples to samples.jsonl, one flushed line each, so a crash loses at most the
    task in flight. orjson, because the stdlib encoder took 17 µs of a sample's budget."""

    def __init__(self, path: Path) -> None:
        try:
            self._fh: IO[bytes] = path.open("ab")
        except OSError as exc:
            raise StoreError(f"cannot open {path}: {exc.strerror}") from exc
        self.path = path

    def write(self, sample: Sample) -> None:
        self.write_lines(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))

    def write_lines(self, lines: bytes) -> None:
        """Append samples already encoded (one JSON line each), as worker processes send them."""
        try:
            self._fh.write(lines)
            self._fh.flush()
        except OSError as exc:
            raise StoreError(
                f"cannot append to {self.path}: {exc.strerror}. The samples written before are "
                f"kept: fix the cause, then `perfbench run --resume {self.path.parent}`"
            ) from exc

    def close(self) -> None:
        """Close; a line that could not be written (disk full) is dropped, not raised again:
        the error was reported by ``write``, and what is on disk stays readable."""
        with contextlib.suppress(OSError):
            self._fh.close()


def read_samples(run_dir: Path) -> Iterator[Sample]:
    """The samples of a run; a torn last line (a crash mid-write) is skipped."""
    path = run_dir / SAMPLES
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            if not line.endswith(b"\n"):
                return  # torn final line
            yield Sample.from_json(orjson.loads(line))


def compact_samples(run_dir: Path, keep: Callable[[Sample], bool] = lambda s: True) -> list[Sample]:
    """Rewrite samples.jsonl without a torn last line, cancelled tasks (to be run again) and
    samples ``keep`` rejects; returns the samples kept. Atomic: a crash here leaves the old
    file."""
    kept = [s for s in read_samples(run_dir) if s.status != "cancelled" and keep(s)]
    path = run_dir / SAMPLES
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{SAMPLES}.", dir=run_dir)
        with os.fdopen(fd, "wb") as fh:
            for sample in kept:
                fh.write(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot rewrite {path}: {exc.strerror}") from exc
    return kept


@dataclass(frozen=True)
class RunInfo:
    path: Path
    meta: dict[str, Any]


def list_runs(root: Path) -> list[RunInfo]:
    """Every run directory under ``root`` with a readable meta.json, oldest first."""
    if not root.is_dir():
        return []
    out = []
    for meta in sorted(root.glob(f"*/{META}")):
        try:
            out.append(RunInfo(meta.parent, read_json(meta)))
        except StoreError:
            continue  # an unreadable directory is not a run; `show` on it gives the reason
    return out


def resolve_run(ref: str, root: Path) -> Path:
    """A run directory from a path, or from a name or label under ``root``; the newest wins."""
    path = Path(ref)
    if (path / META).is_file():
        return path
    matches = [r.path for r in list_runs(root) if r.path.name == ref or r.meta.get("label") == ref]
    if not matches:
        raise StoreError(f"no run '{ref}': not a run directory, nor a name or label in {root}/")
    return matches[-1]


def match_runs(pattern: str, root: Path) -> list[Path]:
    """Every run under ``root`` whose name or label matches the shell pattern, oldest first."""
    return [
        r.path
        for r in list_runs(root)
        if fnmatch.fnmatchcase(r.path.name, pattern)
        or fnmatch.fnmatchcase(str(r.meta.get("label") or ""), pattern)
    ]


def read_summary(run_dir: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """A run's summary.json; for a run killed before writing one, the summary recomputed from
    samples.jsonl (what was measured counts, a torn last line is dropped)."""
    if (run_dir / SUMMARY).is_file():
        summary: dict[str, Any] = read_json(run_dir / SUMMARY)
        return summary
    from perfbench.stats import summarize  # only here: stats is not needed to write a run

    timeouts = {c["id"]: c["timeout_s"] for c in meta["suite"]["cases"]}
    return summarize(read_samples(run_dir), timeouts)


def owner() -> dict[str, Any]:
    """Which process is writing a run (machine and pid), so a reader can tell a run that is
    still going from one whose process was killed."""
    return {"hostname": socket.gethostname(), "pid": os.getpid()}


def read_meta(run_dir: Path) -> dict[str, Any]:
    """A run's meta.json for readers (show, compare, report): its status as ``status`` tells
    it, so a run whose process was killed is not called running."""
    meta: dict[str, Any] = read_json(run_dir / META)
    meta["status"] = status(meta)
    return meta


def status(meta: dict[str, Any]) -> str:
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
