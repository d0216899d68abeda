"""Files of a run directory: atomic JSON documents and the append-only samples.jsonl.

Reading checks every document against what its readers rely on (meta.json, sweep-plan.json
and sample lines as the types of ``store.documents``, summary.json by ``store.checks``): a
damaged file is a ``StoreError`` naming the file (and the line of samples.jsonl) and how to fix it.
Writing never leaves half a file nor a temporary one: a failed write removes its temp file
and raises a ``StoreError`` that keeps the cause (``No space left on device``)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import anyio
import orjson

from perfbench.errors import StoreError
from perfbench.sample import Sample
from perfbench.stats.server_metrics import Scrape
from perfbench.store import cases, checks, documents

META = "meta.json"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"
SERVER_METRICS = "server_metrics.jsonl"  # run --server-metrics: one scrape a line
FLUSH_S = 0.05  # the longest a finished sample waits in memory before samples.jsonl
BATCH_BYTES = 1 << 16  # or until this much is pending
RESERVE = ".reserve"  # room kept back for meta.json's last write (see ``Reserve``)
PLAN_FILE = "sweep-plan.json"

# What checks each document (raising ``checks.Damage``), and how to repair one that fails.
_SHAPES: dict[str, tuple[Callable[[Any], None], str]] = {
    META: (documents.check_meta, "restore meta.json from a copy, or remove the run directory"),
    SUMMARY: (
        lambda doc: _check_summary(doc),
        "summary.json is derived from samples.jsonl: delete it and perfbench recomputes it",
    ),
    PLAN_FILE: (documents.check_sweep, "restore it from a copy, or start the sweep anew"),
}
_LINE_FIX = (
    "The line is damaged: delete it (its task is lost; `perfbench run --resume` of an "
    "unfinished run measures it again) or restore the file from a copy"
)
# mkstemp's temporary files (``.meta.json.k2j4_x9q``), which a kill can leave behind.
_TEMP = re.compile(r"\.[\w.-]+\.jsonl?\.\w+")


class Reserve:
    """Disk space a run keeps back so that, on a disk that filled up during the run, meta.json
    can still say how the run ended (``failed``, with the error) instead of staying
    ``running``: a file made before meta.json is first written, freed when meta.json's last
    write finds no room, and removed when the run ends. A run that cannot keep it back does
    not start: on a nearly full disk its first meta.json would fit and its last would not."""

    SIZE = 256 * 2**10  # meta.json is a few KiB; its temp copy as much again

    def __init__(self, folder: Path) -> None:
        self.path = folder / RESERVE

    def make(self, meta: Any) -> None:
        """Keep back room for ``meta`` rewritten (twice its size, ``SIZE`` at least: a suite
        of thousands of cases lists them all), or raise a ``StoreError`` saying why the run
        cannot start."""
        size = max(self.SIZE, 2 * len(encode_json(meta, self.path.parent / META)))
        try:
            # Random bytes, not zeros: a compressing file system (ZFS, btrfs) stores a
            # block of zeros as a hole, which keeps nothing back.
            self.path.write_bytes(os.urandom(size))
        except OSError as exc:
            self.free()  # a partial file: give back what it took
            raise StoreError(
                f"cannot write {self.path}: {exc.strerror or exc}. A run keeps {size // 1024} "
                f"KiB back in its folder so that meta.json can always say how the run ended: "
                f"free some space, or choose another --out"
            ) from exc

    def free(self) -> bool:
        """Give the space back; whether there was any to give."""
        try:
            self.path.unlink()
        except OSError:
            return False
        return True


# numpy's scalars (a statistic computed with numpy) are numbers, as the stdlib writer took them.
_JSON_OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_APPEND_NEWLINE
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_SERIALIZE_NUMPY
)


def _plain(value: Any) -> float | dict[Any, Any]:
    """A float subclass orjson does not take itself, as the float it is; a mapping that makes
    its entries when read (``_write``), as a dict of them."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def write_json(path: Path, doc: Any) -> None:
    """Write JSON atomically: a temp file in the same folder, fsynced, then renamed over.
    orjson: the stdlib's encoder is pure Python once indenting, and a 1,000-case summary.json
    (21 MB) took it ~5 s and ~110 MB of chunks. The outer levels are written an entry at a
    time (``_write``), the bytes those of one ``orjson.dumps`` of the whole: a 10^4-case
    summary.json is ~360 MB of text, which one ``dumps`` held at once."""

    def write(fh: IO[bytes]) -> None:
        try:
            _write(fh, doc, 0)
        except orjson.JSONEncodeError as exc:  # a perfbench bug (a value JSON cannot hold)
            raise StoreError(f"cannot write {path}: {exc}") from exc
        fh.write(b"\n")

    _replace(path, write)


# Written an entry at a time: the first levels, and deeper any container of more entries
# (summary.json's runs[i].cases); the rest one ``dumps`` each (a case's figures).
_LEVELS, _MANY = 3, 256
_PIECE_OPTIONS = _JSON_OPTIONS & ~orjson.OPT_APPEND_NEWLINE


def _write(fh: IO[bytes], doc: Any, depth: int) -> None:
    """``doc`` as ``orjson.dumps`` with ``_JSON_OPTIONS`` writes it (less the last newline),
    ``depth`` levels in (each line of its text indented two spaces a level). A non-empty dict
    or list in the first ``_LEVELS``, or of more than ``_MANY`` entries, is written an entry
    at a time."""
    pad = b"  " * depth
    # A mapping other than a dict makes its entries when read (summary.json's per-case
    # figures, stats/summary.CaseFigures): orjson takes dicts only, and so it goes an entry
    # at a time, each made, written and let go.
    made = isinstance(doc, Mapping) and not isinstance(doc, dict)
    whole = not isinstance(doc, dict | list) or not doc or (depth >= _LEVELS and len(doc) <= _MANY)
    if whole and not made:
        data = orjson.dumps(doc, default=_plain, option=_PIECE_OPTIONS)
        fh.write(data.replace(b"\n", b"\n" + pad) if depth and b"\n" in data else data)
        return
    if not doc:  # an empty mapping of that kind: as orjson writes an empty dict
        fh.write(b"{}")
        return
    inner = pad + b"  "
    is_dict = isinstance(doc, Mapping)
    fh.write(b"{\n" if is_dict else b"[\n")
    entries = doc.items() if isinstance(doc, Mapping) else ((None, v) for v in doc)
    for k, (key, value) in enumerate(entries):
        fh.write(b",\n" + inner if k else inner)
        if is_dict:  # the key as orjson writes it (OPT_NON_STR_KEYS: 1 is "1")
            fh.write(orjson.dumps({key: 0}, option=orjson.OPT_NON_STR_KEYS)[1:-2] + b" ")
        _write(fh, value, depth + 1)
    fh.write(b"\n" + pad + (b"}" if is_dict else b"]"))


def encode_json(doc: Any, path: Path) -> bytes:
    """``doc`` as ``write_json`` writes it to ``path`` (named in the error)."""
    try:
        return orjson.dumps(doc, default=_plain, option=_JSON_OPTIONS)
    except orjson.JSONEncodeError as exc:  # a perfbench bug (a value JSON cannot hold)
        raise StoreError(f"cannot write {path}: {exc}") from exc


def _replace(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` through a temp file renamed over it: a reader (or a kill) sees the old
    file or the new one. On failure the temp file goes too, so a full disk is not fuller."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc


def remove_strays(folder: Path) -> None:
    """Remove the temp files a process killed mid-write left (never the documents): call only
    while holding the folder's lock, since a live writer's temp file looks the same."""
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if _TEMP.fullmatch(path.name):
                with contextlib.suppress(OSError):
                    path.unlink()


def read_json(path: Path) -> Any:
    """A JSON document; a run directory's own (meta.json, summary.json, sweep-plan.json) is
    also checked against what its readers rely on, so every reader says the same thing about
    a damaged one."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError as exc:
        raise StoreError(f"{path} does not exist") from exc
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: byte {exc.start}: not UTF-8 text; {_fix(path)}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "empty" if not text.strip() else f"not valid JSON ({exc.msg})"
        raise StoreError(f"{path}:{exc.lineno}:{exc.colno}: {what}; {_fix(path)}") from exc
    known = _SHAPES.get(path.name)
    if known is not None:
        try:
            known[0](doc)
        except checks.Damage as exc:
            raise StoreError(f"{path}: {exc}; {known[1]}") from None
    if path.name == SUMMARY and doc.get("schema") == cases.SCHEMA:
        cases.attach(doc, path.parent)
    return doc


def _check_summary(doc: Any) -> None:
    many = isinstance(doc, dict) and doc.get("schema") == cases.SCHEMA
    checks.check(doc, checks.SUMMARY_WITHOUT_CASES if many else checks.SUMMARY)


def write_summary(run_dir: Path, summary: Mapping[str, Any]) -> None:
    """summary.json, and for a run of many cases cases.jsonl first (``store.cases``): a
    summary.json that says its cases are there is never written before them."""
    if not cases.many(summary):
        write_json(run_dir / SUMMARY, summary)
        return

    def write(fh: IO[bytes]) -> None:
        fh.writelines(cases.lines(summary))

    _replace(run_dir / cases.CASES, write)
    write_json(run_dir / SUMMARY, cases.without_cases(summary))


def _fix(path: Path) -> str:
    known = _SHAPES.get(path.name)
    return known[1] if known is not None else "restore it from a copy"


class SampleWriter:
    """Appends samples to samples.jsonl in batches: a finished sample waits in memory at most
    ``FLUSH_S`` (``flush_every``, beside the run) or until ``BATCH_BYTES`` are pending, so a
    kill -9 loses the tasks in flight and at most the last 50 ms of finished ones (``--resume``
    runs them again). One write per batch, not per sample: at thousands of tasks a second the
    per-sample write and flush were a tenth of the client's CPU. orjson, because the stdlib
    encoder took 17 µs of a sample's budget."""

    def __init__(self, path: Path) -> None:
        try:
            self._fh: IO[bytes] = path.open("ab")
        except OSError as exc:
            raise StoreError(
                f"cannot open {path}: {exc.strerror}. Fix the cause, then "
                f"`perfbench run --resume {path.parent}`"
            ) from exc
        self.path = path
        self._pending: list[bytes] = []
        self._size = 0

    def write(self, sample: Sample) -> None:
        self.write_lines(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))

    def write_lines(self, lines: bytes) -> None:
        """Append samples already encoded (one JSON line each), as worker processes send them."""
        self._pending.append(lines)
        self._size += len(lines)
        if self._size >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write what is pending (a ``StoreError`` if the disk refuses it)."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._size = 0
        try:
            self._fh.write(data)
            self._fh.flush()
        except OSError as exc:
            raise StoreError(
                f"cannot append to {self.path}: {exc.strerror}. The samples written before are "
                f"kept: fix the cause, then `perfbench run --resume {self.path.parent}`"
            ) from exc

    async def flush_every(self, seconds: float = FLUSH_S) -> None:
        """Flush every ``seconds`` until cancelled (a task beside the run's engine)."""
        while True:
            await anyio.sleep(seconds)
            self.flush()

    def close(self) -> None:
        """Write what is pending and close; a line that could not be written (disk full) is
        dropped, not raised again: the run's end flushes first (``flush``), where a failure
        is reported, and what is on disk stays readable."""
        with contextlib.suppress(OSError, StoreError):
            self.flush()
        with contextlib.suppress(OSError):
            self._fh.close()


def read_samples(run_dir: Path) -> Iterator[Sample]:
    """The samples of a run, each line checked. A torn last line (a kill mid-write) is
    skipped, since its task did not finish as far as the run knows; a damaged line elsewhere
    is a ``StoreError`` naming the line."""
    path = run_dir / SAMPLES
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    with fh:
        for number, line in enumerate(fh, 1):
            if not line.endswith(b"\n"):
                return  # torn final line
            if line.strip():  # a blank line (an editor's) holds no sample
                yield _sample(line, path, number)


def _sample(line: bytes, path: Path, number: int) -> Sample:
    try:
        return documents.read_sample(line)
    except checks.Damage as exc:
        raise StoreError(f"{path}:{number}: {exc}. {_LINE_FIX}") from None


def read_server_metrics(run_dir: Path) -> Iterator[Scrape]:
    """The scrapes of server_metrics.jsonl in file order, leniently: unlike samples.jsonl it
    is an observation beside the run that no statistic depends on, so a missing or unreadable
    file is no scrapes, and a line that is not a scrape (torn by a kill, edited) is skipped
    rather than a ``StoreError`` that would stop a report."""
    try:
        fh = (run_dir / SERVER_METRICS).open("rb")
    except OSError:
        return
    with fh:
        try:
            for line in fh:
                scrape = _scrape(line)
                if scrape is not None:
                    yield scrape
        except OSError:
            return  # a read error part way: the scrapes before it stand


def _scrape(line: bytes) -> Scrape | None:
    """A line as the scraper writes it (``{"t", "values"}`` or ``{"t", "error"}``), or None."""
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    t = doc.get("t") if isinstance(doc, dict) else None
    if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
        return None
    values = doc.get("values")
    if not isinstance(values, dict):
        return Scrape(float(t), None) if isinstance(doc.get("error"), str) else None
    return Scrape(float(t), {k: float(v) for k, v in values.items() if _finite(v)})


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def rewrite_samples(run_dir: Path, samples: Iterable[Sample]) -> None:
    """Replace samples.jsonl with ``samples``. Atomic: a kill or a full disk here leaves the
    old file whole."""
    path = run_dir / SAMPLES

    def write(fh: IO[bytes]) -> None:
        for sample in samples:
            fh.write(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))

    try:
        _replace(path, write)
    except StoreError as exc:
        raise StoreError(
            f"{exc}. samples.jsonl is unchanged: fix the cause, then resume again"
        ) from exc.__cause__
