"""A finished (or interrupted) run directory as pandas frames, and samples written out as CSV,
Parquet or JSON Lines for notebooks and other tools.

``load_run`` reads meta.json; summary.json is read when first asked for (``Run.summary``), so
an export never parses it (a 10^4-case summary.json is ~360 MB of text, 1.1 GB parsed);
``Run.samples`` and ``Run.steps`` read samples.jsonl on each call (through
``store.read_samples``, so a torn last line is skipped). Rows are gathered in chunks of typed
columns rather than as a list of ``Sample`` objects, so a million samples cost the frame's
memory plus one chunk of Python objects, not a million objects.
``export`` writes chunk by chunk (a Parquet row group each) and never holds the whole frame: an
export of 10^6 samples took 830 MB as one frame.

The only I/O is in ``load_run``, the two frame readers and ``export``; the rest is pure.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import orjson
import pandas as pd

from perfbench import store
from perfbench.errors import StoreError
from perfbench.sample import STATUSES, Sample, Step

Format = Literal["csv", "parquet", "json"]
PhaseFilter = Literal["measured", "warmup", "all"]
FORMATS: tuple[Format, ...] = get_args(Format)
PHASES: tuple[PhaseFilter, ...] = get_args(PhaseFilter)

# Rows held as Python objects at a time before they become typed columns. A chunk costs ~4 kB
# a row while it is typed (rows, object frame, typed copy): 65,536 rows made an export of
# 200,000 samples peak at 391 MB, 8,192 rows at 165 MB (107 MB of it pandas and pyarrow).
_CHUNK = 8_192

_STATUS = pd.CategoricalDtype(list(STATUSES))
_PHASE = pd.CategoricalDtype(["warmup", "measured"])
_KIND = pd.CategoricalDtype(["model", "tool", "agent"])

# Column name → dtype, in the order of Sample.to_json. Nullable integers ("Int64") keep a
# missing token count apart from zero; "str" is pandas' string dtype (NaN when missing).
SAMPLE_COLUMNS: dict[str, Any] = {
    "phase": _PHASE,
    "run": "int64",
    "case": "str",  # category once all chunks are joined (the set of cases is not known first)
    "iteration": "int64",
    "language": "str",  # likewise
    "tags": "str",  # joined with ","
    "status": _STATUS,
    "scheduled": "float64",
    "start": "float64",
    "end": "float64",
    "latency": "float64",
    "latency_intended": "float64",
    "ttft": "float64",
    "ttfo": "float64",
    "itl_mean": "float64",
    "itl_max": "float64",
    "model_calls": "int64",
    "tool_calls": "int64",
    "tokens_in": "Int64",
    "tokens_out": "Int64",
    "tokens_estimated": "bool",
    "tokenizer": "str",
    "tokens_out_estimate": "Int64",
    "tokens_cache_read": "Int64",
    "tokens_cache_write": "Int64",
    "tokens_reasoning": "Int64",
    "model_served": "str",
    "cost": "float64",
    "cost_reported": "float64",
    "input_chars": "int64",
    "expect_ok": "boolean",
    "error_kind": "str",
    "error": "str",
    "http_status": "Int64",
    "retries": "int64",
    "throttled": "int64",
    "retry_after": "float64",
    "concurrency": "int64",
    "exit_status": "Int64",  # a cmd: agent's exit code (-N: killed by signal N); else missing
    "n_steps": "int64",
}

STEP_COLUMNS: dict[str, Any] = {
    "phase": _PHASE,
    "run": "int64",
    "case": "str",
    "iteration": "int64",
    "step": "int64",  # position of the step inside its task, from 0
    "kind": _KIND,
    "name": "str",
    "start": "float64",
    "duration": "float64",
    "wait": "float64",
    "headers": "float64",
    "ttft": "float64",
    "http_status": "Int64",
    "read_delay": "float64",
    "tokens_in": "Int64",
    "tokens_out": "Int64",
    "status": _STATUS,
    "turn": "Int64",  # a multi-turn case's turn, from 0
    "tokens_estimate": "Int64",  # the offline count of the reply, when usage was also given
    "model": "str",  # the model a call through the proxy asked for
    "finish": "str",  # why the reply ended, as the API said it
}

_SUFFIX: dict[Format, str] = {"csv": ".csv", "parquet": ".parquet", "json": ".json"}
_PARQUET_HINT = "writing parquet needs pyarrow: pip install 'perfbench-llm[parquet]'"


@dataclass(frozen=True)
class Run:
    """One run directory: its meta.json, and its summary.json unless the run never finished.

    ``meta`` and ``summary`` are left out of the repr: summary.json holds encoded histograms
    that would flood a notebook cell. ``summary`` is read on first use and kept."""

    path: Path
    meta: dict[str, Any] = field(repr=False)

    @functools.cached_property
    def summary(self) -> dict[str, Any] | None:
        """summary.json, or None when the run never finished (read once, when first asked)."""
        path = self.path / store.SUMMARY
        return store.read_json(path) if path.is_file() else None

    def samples(self, phase: PhaseFilter = "measured") -> pd.DataFrame:
        """One row per task of ``phase`` ("measured", "warmup" or "all"), flat columns
        (``SAMPLE_COLUMNS``); per-step data is in ``steps``."""
        return _joined(self.sample_chunks(phase))

    def sample_chunks(self, phase: PhaseFilter = "measured") -> Iterator[pd.DataFrame]:
        """``samples`` a chunk of rows at a time, each typed as the whole frame would be;
        a chunk's categories are those of the chunks before it and any new ones after them
        (so a file written chunk by chunk reads back as ``samples``)."""
        wanted = _phase_test(phase)
        rows = (_sample_row(s) for s in store.read_samples(self.path) if wanted(s.phase))
        suite = self.meta.get("suite", {}).get("cases", [])
        known = {
            "case": [str(c.get("id")) for c in suite],
            "language": [str(c.get("language")) for c in suite],
        }
        return _chunks(rows, SAMPLE_COLUMNS, known)

    def steps(self, phase: PhaseFilter = "measured") -> pd.DataFrame:
        """One row per model or tool call; (phase, run, case, iteration) is the task's key in
        ``samples``, so the two frames merge on those columns."""
        wanted = _phase_test(phase)
        rows = (
            row for s in store.read_samples(self.path) if wanted(s.phase) for row in _step_rows(s)
        )
        suite = self.meta.get("suite", {}).get("cases", [])
        return _joined(_chunks(rows, STEP_COLUMNS, {"case": [str(c.get("id")) for c in suite]}))

    def overall(self) -> dict[str, dict[str, float]]:
        """Across runs, per metric ("latency.p95", "throughput", ...): median, min, max, n."""
        overall: dict[str, dict[str, float]] = self._summary()["across_runs"]["overall"]
        return overall

    def per_run(self) -> pd.DataFrame:
        """One row per measured run: ``run``, its ``window`` in seconds, and its overall
        metrics flattened with dotted names ("latency.p95", "failures.server_error.count")."""
        rows = [
            {"run": r["run"], "window": r["window"], **dict(_flatten(r["overall"]))}
            for r in self._summary()["runs"]
        ]
        return pd.DataFrame(rows, columns=None if rows else ["run", "window"])

    def _summary(self) -> dict[str, Any]:
        if self.summary is None:
            raise StoreError(
                f"{self.path} has no {store.SUMMARY} (the run never finished); "
                "its samples are still readable with Run.samples()"
            )
        return self.summary


def load_run(path: str | Path) -> Run:
    """The run directory at ``path`` (a directory, not a name or label: resolve those with
    ``store.resolve_run`` first)."""
    run_dir = Path(path)
    if not run_dir.exists():
        raise StoreError(f"{run_dir} does not exist")
    if not run_dir.is_dir():
        raise StoreError(f"{run_dir} is not a run directory (not a directory)")
    if not (run_dir / store.META).is_file():
        raise StoreError(f"{run_dir} is not a run directory (no {store.META})")
    meta: dict[str, Any] = store.read_json(run_dir / store.META)
    return Run(run_dir, meta)


def default_path(run: Run, fmt: Format, phase: PhaseFilter = "measured") -> Path:
    """``<run dir>/samples.<fmt>``, with the phase in the name unless it is "measured"
    (JSON Lines are written as ``.json`` so samples.jsonl, the run's own record, is never hit)."""
    _check(fmt, FORMATS, "format")
    _check(phase, PHASES, "phase")
    stem = "samples" if phase == "measured" else f"samples-{phase}"
    return run.path / (stem + _SUFFIX[fmt])


def export(
    run: Run,
    fmt: Format,
    out: str | Path | None = None,
    phase: PhaseFilter = "measured",
) -> Path:
    """Write ``run.samples(phase)`` to ``out`` (default: ``default_path``) and return the path.

    CSV has no index column; JSON is JSON Lines, one record per sample, missing values as
    null; Parquet keeps the dtypes. An existing file is replaced atomically; parent
    directories are created. The run's own files are never overwritten."""
    _check(fmt, FORMATS, "format")
    _check(phase, PHASES, "phase")
    path = Path(out) if out is not None else default_path(run, fmt, phase)
    _refuse_run_files(run, path)
    if fmt == "parquet":
        _require_pyarrow()
    writers: dict[Format, Callable[[Iterable[pd.DataFrame], Path], None]] = {
        "csv": _write_csv,
        "json": _write_jsonl,
        "parquet": _write_parquet,
    }
    _atomic_write(path, lambda tmp: writers[fmt](run.sample_chunks(phase), tmp))
    return path


# --- rows -----------------------------------------------------------------------------------


def _phase_test(phase: PhaseFilter) -> Callable[[str], bool]:
    _check(phase, PHASES, "phase")
    if phase == "all":
        return lambda _: True
    return lambda p: p == phase


def _sample_row(s: Sample) -> tuple[Any, ...]:
    # Same order as SAMPLE_COLUMNS; latency is recomputed (end - start), not read back.
    return (
        s.phase,
        s.run,
        s.case,
        s.iteration,
        s.language,
        ",".join(s.tags),
        s.status,
        s.scheduled,
        s.start,
        s.end,
        s.latency,
        s.latency_intended,
        s.ttft,
        s.ttfo,
        s.itl_mean,
        s.itl_max,
        s.model_calls,
        s.tool_calls,
        s.tokens_in,
        s.tokens_out,
        s.tokens_estimated,
        s.tokenizer,
        s.tokens_out_estimate,
        s.tokens_cache_read,
        s.tokens_cache_write,
        s.tokens_reasoning,
        s.model_served,
        s.cost,
        s.cost_reported,
        s.input_chars,
        s.expect_ok,
        s.error_kind,
        s.error,
        s.http_status,
        s.retries,
        s.throttled,
        s.retry_after,
        s.concurrency,
        s.exit_status,
        len(s.steps),
    )


def _step_rows(s: Sample) -> Iterator[tuple[Any, ...]]:
    for i, st in enumerate(s.steps):
        yield (s.phase, s.run, s.case, s.iteration, i, *_step_fields(st))


def _step_fields(st: Step) -> tuple[Any, ...]:
    return (
        st.kind,
        st.name,
        st.start,
        st.duration,
        st.wait,
        st.headers,
        st.ttft,
        st.http_status,
        st.read_delay,
        st.tokens_in,
        st.tokens_out,
        st.status,
        st.turn,
        st.tokens_estimate,
        st.model,
        st.finish,
    )


def _chunks(
    rows: Iterable[tuple[Any, ...]],
    columns: Mapping[str, Any],
    known: Mapping[str, list[str]],
) -> Iterator[pd.DataFrame]:
    """Typed frames of at most ``_CHUNK`` rows (at least one, maybe empty), to bound the
    Python objects alive at once. The columns of ``known`` are categories: the values known
    (the suite's cases, from meta.json) sorted, then any other in order of appearance."""
    categories = {name: sorted(set(values)) for name, values in known.items()}
    batches = _batches(rows, _CHUNK)
    first = next(batches, [])
    for batch in itertools.chain([first], batches):
        frame = _typed(batch, columns)
        for name, values in categories.items():
            seen = set(values)
            values += [v for v in dict.fromkeys(frame[name].dropna()) if v not in seen]
            frame[name] = frame[name].astype(pd.CategoricalDtype(values))
        yield frame


def _joined(chunks: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One frame of ``_chunks``: each chunk's categories widened to the last chunk's (a
    join of frames with different categories would turn them into plain strings)."""
    frames = list(chunks)
    last = frames[-1]
    if len(frames) == 1:
        return last
    wide = {n: t for n, t in last.dtypes.items() if isinstance(t, pd.CategoricalDtype)}
    return pd.concat([f.astype(wide) for f in frames], ignore_index=True)


def _batches(rows: Iterable[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _typed(batch: list[tuple[Any, ...]], columns: Mapping[str, Any]) -> pd.DataFrame:
    # Object columns first: letting pandas infer would turn an all-None chunk of an integer
    # column into floats and lose the distinction the nullable dtypes keep.
    names = list(columns)
    raw = pd.DataFrame.from_records(batch, columns=names, coerce_float=False)
    return raw.astype(object).astype(dict(columns))


def _flatten(metrics: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield prefix + key, value


# --- writing --------------------------------------------------------------------------------


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")


def _refuse_run_files(run: Run, path: Path) -> None:
    own = {(run.path / name).resolve() for name in store.OWN_FILES}
    if path.resolve() in own:
        raise StoreError(f"{path} is one of the run's own files; choose another --out")


def _require_pyarrow() -> None:
    try:
        importlib.import_module("pyarrow")
    except ImportError as exc:
        raise StoreError(_PARQUET_HINT) from exc


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same folder, then rename it over ``path``: a
    reader (or a crash) never sees half a file. Not mkstemp: its 0600 mode would survive the
    rename, and an export is meant to be shared, so the file gets the umask's mode."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path.parent}: {exc.strerror}") from exc
    if path.is_dir():
        raise StoreError(f"{path} is a directory; give a file name")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        # Not only FileNotFoundError: on a read-only file system unlinking even a file that
        # is not there fails with EROFS, which would replace the StoreError above.
        with contextlib.suppress(OSError):
            tmp.unlink()


def _write_csv(frames: Iterable[pd.DataFrame], path: Path) -> None:
    with path.open("w", newline="") as fh:
        for n, frame in enumerate(frames):
            frame.to_csv(fh, index=False, header=n == 0)


def _write_parquet(frames: Iterable[pd.DataFrame], path: Path) -> None:
    """A row group per chunk. The categories' codes are widened to int32 in the file's
    schema: pandas picks int8 for a few categories and more bits as they grow, and every
    row group must have the schema of the first."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    writer: pq.ParquetWriter | None = None
    try:
        for frame in frames:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, _wide_codes(table.schema))
            writer.write_table(table.cast(writer.schema))
    finally:
        if writer is not None:
            writer.close()


def _wide_codes(schema: Any) -> Any:
    import pyarrow as pa

    fields = [
        f.with_type(pa.dictionary(pa.int32(), f.type.value_type, f.type.ordered))
        if pa.types.is_dictionary(f.type)
        else f
        for f in schema
    ]
    return pa.schema(fields, metadata=schema.metadata)


def _write_jsonl(frames: Iterable[pd.DataFrame], path: Path) -> None:
    # orjson rather than DataFrame.to_json: pandas rounds floats to at most 15 significant
    # digits, orjson writes the shortest exact repr; one chunk's dicts alive at a time.
    with path.open("wb") as fh:
        for frame in frames:
            for record in frame.to_dict(orient="records"):
                fh.write(orjson.dumps(record, default=_json_default, option=_JSON_OPTIONS))


_JSON_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY


def _json_default(value: Any) -> Any:
    # pd.NA (nullable ints and booleans) and NaN floats are both "missing": null.
    if value is pd.NA:
        return None
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
