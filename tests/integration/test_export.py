"""perfbench.export: a run directory made by a real Session (in-process mock, trio's virtual
clock) read back as frames, written as CSV, JSON Lines and Parquet, and read back again."""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from perfbench import export as export_module
from perfbench import store
from perfbench.errors import StoreError
from perfbench.export import Run, default_path, export, load_run
from perfbench.spec import Plan
from tests.helpers import failing_priced_run

RUNS, WARMUP, REPEAT = 3, 1, 2
KEYS = ["phase", "run", "case", "iteration"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run (16 cases × 2 repeats × 4 passes) with injected server errors, so the
    frame has failures, priced costs and several steps per task."""
    plan = Plan(runs=RUNS, warmup=WARMUP, repeat=REPEAT, concurrency=4)
    return failing_priced_run(tmp_path_factory.mktemp("runs"), plan)


@pytest.fixture
def run(run_dir: Path) -> Run:
    return load_run(run_dir)


@pytest.fixture
def copy(run_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the run directory, for tests that damage it."""
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def raw_lines(run_dir: Path, phase: str = "measured") -> list[dict[str, Any]]:
    docs = [json.loads(line) for line in (run_dir / store.SAMPLES).read_text().splitlines()]
    return [d for d in docs if phase == "all" or d["phase"] == phase]


def plain(value: Any) -> Any:
    """A frame cell as a plain Python value, every kind of missing as None."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


# --- frames ---------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["measured", "warmup", "all"])
def test_one_row_per_sample_line_of_the_phase(run: Run, run_dir: Path, phase: Any) -> None:
    lines = raw_lines(run_dir, phase)
    frame = run.samples(phase)
    assert len(frame) == len(lines) > 0
    assert set(frame["phase"]) == ({"warmup", "measured"} if phase == "all" else {phase})


def test_sample_columns_hold_the_sample_fields(run: Run, run_dir: Path) -> None:
    frame = run.samples("all")
    assert list(frame.columns) == list(export_module.SAMPLE_COLUMNS)
    for row, doc in zip(records(frame), raw_lines(run_dir, "all"), strict=True):
        for name in export_module.SAMPLE_COLUMNS:
            if name == "tags":
                assert row[name] == ",".join(doc["tags"])
            elif name == "n_steps":
                assert row[name] == len(doc["steps"])
            elif name not in ("latency", "latency_intended"):
                assert row[name] == doc.get(name), name
    # The fixture is only a test of something if it has failures, costs and tool steps.
    assert {"ok", "error"} <= set(frame["status"])
    assert frame["cost"].notna().any() and (frame["n_steps"] > 1).any()


def test_latency_is_end_minus_start(run: Run) -> None:
    frame = run.samples("all")
    assert (frame["latency"] == frame["end"] - frame["start"]).all()
    assert frame["latency_intended"].isna().all()  # closed loop: no intended start


def test_dtypes_suit_analysis(run: Run) -> None:
    dtypes = run.samples().dtypes
    for name in ("phase", "status", "case", "language"):
        assert isinstance(dtypes[name], pd.CategoricalDtype), name
    for name in ("start", "end", "latency", "ttft", "cost"):
        assert dtypes[name] == "float64", name
    assert dtypes["tokens_in"] == "Int64" and dtypes["run"] == "int64"
    assert dtypes["expect_ok"] == "boolean" and dtypes["tokens_estimated"] == "bool"


def test_steps_have_one_row_per_step_and_the_task_key(run: Run, run_dir: Path) -> None:
    steps = run.steps("all")
    docs = raw_lines(run_dir, "all")
    assert len(steps) == sum(len(d["steps"]) for d in docs)
    expected = [
        {**{k: d[k] for k in KEYS}, "step": i, **st}
        for d in docs
        for i, st in enumerate(d["steps"])
    ]
    assert records(steps) == [{k: e.get(k) for k in steps.columns} for e in expected]
    assert {"stop", "tool_calls"} <= set(steps["finish"].dropna())  # why each reply ended
    # Every step belongs to exactly one sample of the same phase filter.
    merged = run.steps().merge(run.samples(), on=KEYS, how="left", indicator=True)
    assert (merged["_merge"] == "both").all()


def test_chunked_reading_gives_the_same_frame(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = run.samples("all")
    monkeypatch.setattr(export_module, "_CHUNK", 7)  # many chunks, with different cases each
    pd.testing.assert_frame_equal(run.samples("all"), whole)
    assert isinstance(whole["case"].dtype, pd.CategoricalDtype)


def test_torn_last_line_is_skipped(copy: Path) -> None:
    before = len(load_run(copy).samples("all"))
    last = (copy / store.SAMPLES).read_bytes().splitlines()[-1]
    with (copy / store.SAMPLES).open("ab") as fh:
        fh.write(last[: len(last) // 2])  # a crash mid-write: no newline
    assert len(load_run(copy).samples("all")) == before


def test_empty_run_gives_typed_empty_frames(copy: Path, tmp_path: Path) -> None:
    (copy / store.SAMPLES).write_bytes(b"")
    run = load_run(copy)
    frame = run.samples()
    assert len(frame) == 0 and list(frame.columns) == list(export_module.SAMPLE_COLUMNS)
    assert frame.dtypes["latency"] == "float64"
    assert len(run.steps()) == 0
    assert len(pd.read_csv(export(run, "csv", tmp_path / "e.csv"))) == 0


# --- errors when loading --------------------------------------------------------------------


def test_missing_run_dir_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-run"
    with pytest.raises(StoreError, match="no-such-run") as info:
        load_run(missing)
    assert str(missing) in str(info.value)


def test_a_folder_without_meta_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"not a run directory \(no meta.json\)"):
        load_run(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a run directory"):
        load_run(tmp_path / "file")


def test_unfinished_run_has_samples_but_no_summary(copy: Path) -> None:
    (copy / store.SUMMARY).unlink()
    run = load_run(copy)
    assert run.summary is None and len(run.samples()) > 0
    with pytest.raises(StoreError, match="never finished"):
        run.per_run()
    with pytest.raises(StoreError, match="never finished"):
        run.overall()


# --- summary --------------------------------------------------------------------------------


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def test_per_run_rows_equal_the_summary_runs(run: Run, run_dir: Path) -> None:
    summary = json.loads((run_dir / store.SUMMARY).read_text())
    table = run.per_run()
    assert list(table["run"]) == list(range(RUNS))
    for row, stored in zip(records(table), summary["runs"], strict=True):
        expected = flatten(stored["overall"])
        assert row["window"] == stored["window"]
        assert {k: row[k] for k in expected} == expected
        assert set(row) - set(expected) <= {"run", "window"} | {
            k
            for k, v in row.items()
            if v is None  # metrics only other runs have
        }
    assert {"latency.p50", "latency.p95", "throughput", "error_rate", "cost_per_task"} <= set(
        table.columns
    )


def test_overall_is_the_across_runs_spread(run: Run, run_dir: Path) -> None:
    summary = json.loads((run_dir / store.SUMMARY).read_text())
    overall = run.overall()
    assert overall == summary["across_runs"]["overall"]
    p95 = run.per_run()["latency.p95"]
    assert overall["latency.p95"]["median"] == p95.median()
    assert overall["latency.p95"]["max"] == p95.max()


def test_nearest_rank_p95_per_language_matches_the_pooled_summary(run: Run) -> None:
    # What docs/python-api.md shows: numpy's inverted_cdf is perfbench's nearest rank.
    ok = run.samples().query("status == 'ok'")
    p95 = ok.groupby("language", observed=True)["latency"].agg(
        lambda s: np.percentile(s, 95, method="inverted_cdf")
    )
    assert run.summary is not None
    pooled = run.summary["pooled"]["languages"]
    assert set(p95.index) == set(pooled)
    for lang, value in p95.items():
        assert pooled[lang]["latency"]["method"] == "exact"
        assert value == pooled[lang]["latency"]["p95"]


def test_repr_leaves_out_meta_and_summary(run: Run) -> None:
    assert repr(run) == f"Run(path={run.path!r})"


# --- export ---------------------------------------------------------------------------------


def read_back(fmt: str, path: Path) -> pd.DataFrame:
    if fmt == "csv":
        return pd.read_csv(path)
    if fmt == "json":
        return pd.read_json(path, lines=True, precise_float=True)
    return pd.read_parquet(path)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_export_round_trips(run: Run, tmp_path: Path, fmt: Any) -> None:
    out = tmp_path / "deep" / "er" / f"samples.{fmt}"  # parents are created
    assert export(run, fmt, out, phase="all") == out
    frame, back = run.samples("all"), read_back(fmt, out)
    assert list(back.columns) == list(frame.columns)
    if fmt == "parquet":
        pd.testing.assert_frame_equal(back, frame)  # dtypes too
    got, want = records(back), records(frame)
    assert got == want


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_export_written_chunk_by_chunk_is_the_whole_frame_s(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: Any
) -> None:
    """export never holds the whole frame (830 MB at 10^6 samples): it writes chunk by chunk,
    a Parquet row group each. The file must be the one frame's, categories and all."""
    whole = run.samples("all")
    monkeypatch.setattr(export_module, "_CHUNK", 7)  # many chunks, different cases in each
    out = export(run, fmt, tmp_path / f"s.{fmt}", phase="all")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        assert pq.ParquetFile(out).metadata.num_row_groups == math.ceil(len(whole) / 7)
        pd.testing.assert_frame_equal(pd.read_parquet(out), whole)
    elif fmt == "csv":  # byte for byte what one frame writes
        assert out.read_text() == whole.to_csv(index=False)
    else:
        assert records(read_back(fmt, out)) == records(whole)


def test_categories_are_the_suite_s_cases_also_those_without_a_sample(copy: Path) -> None:
    """Chunked, the categories cannot wait for the last row: they are meta.json's cases (a
    run's frames then have the same categories whatever their phase or chunking)."""
    lines = (copy / store.SAMPLES).read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])["case"]
    (copy / store.SAMPLES).write_bytes(b"".join(x for x in lines if json.loads(x)["case"] != first))
    frame = load_run(copy).samples("all")
    cases = [c["id"] for c in load_run(copy).meta["suite"]["cases"]]
    assert list(frame["case"].cat.categories) == sorted(cases)
    assert first not in set(frame["case"])


def test_json_is_one_record_per_line(run: Run, tmp_path: Path) -> None:
    out = export(run, "json", tmp_path / "s.json")
    lines = out.read_text().splitlines()
    assert len(lines) == len(run.samples())
    first = json.loads(lines[0])
    assert first["latency"] == first["end"] - first["start"]
    assert first["scheduled"] is None  # missing values are null, not NaN


def test_export_overwrites_and_defaults_into_the_run_dir(copy: Path) -> None:
    run = load_run(copy)
    assert default_path(run, "csv") == copy / "samples.csv"
    assert default_path(run, "json", "warmup") == copy / "samples-warmup.json"
    (copy / "samples.csv").write_text("stale\n")
    assert export(run, "csv") == copy / "samples.csv"
    assert len(pd.read_csv(copy / "samples.csv")) == len(run.samples())
    assert not [p.name for p in copy.iterdir() if p.name.startswith(".")]  # no temp files left


def test_export_files_get_the_umask_mode_not_0600(run: Run, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = export(run, "csv", tmp_path / "s.csv")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_export_never_overwrites_the_runs_own_files(copy: Path) -> None:
    run = load_run(copy)
    before = (copy / store.SAMPLES).read_bytes()
    with pytest.raises(StoreError, match="run's own files"):
        export(run, "json", copy / store.SAMPLES)
    assert (copy / store.SAMPLES).read_bytes() == before


def test_parquet_without_pyarrow_says_what_to_install(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    with pytest.raises(StoreError, match=r"pip install 'perfbench-llm\[parquet\]'"):
        export(run, "parquet", tmp_path / "s.parquet")
    assert not list(tmp_path.iterdir())


def test_unknown_format_or_phase_is_a_value_error(run: Run, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown format 'xlsx'"):
        export(run, "xlsx", tmp_path / "s.xlsx")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown phase 'both'"):
        run.samples("both")  # type: ignore[arg-type]
