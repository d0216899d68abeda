"""Files of a run directory: atomic JSON documents and the append-only samples.jsonl."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from perfbench.errors import StoreError
from perfbench.sample import Sample

SAMPLES = "samples.jsonl"


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
