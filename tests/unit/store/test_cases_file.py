"""cases.jsonl (store/cases.py): a run of many cases keeps its per-case figures a line a case
beside summary.json, and reads back the summary a summary.json holding them gives (issue 38:
a 10^4-case summary.json was 365 MB, which `show` parsed into 1.1 GB)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from perfbench import store
from perfbench.errors import StoreError
from perfbench.sample import Sample
from perfbench.stats.summary import summarize
from perfbench.store import cases


def _summary(n_cases: int, runs: int = 2) -> Any:
    """A summary of ``runs`` runs of ``n_cases`` one-task cases (the last case in run 0 only)."""

    def samples() -> Any:
        for run in range(runs):
            for i in range(n_cases if run == 0 else n_cases - 1):
                t = run * 10 + i * 0.001
                yield Sample("measured", run, f"c{i:05}", 0, "en", t, t + 0.001 + i * 1e-6)

    return summarize(samples(), {f"c{i:05}": 60.0 for i in range(n_cases)})


def _plain(value: Any) -> Any:
    """``value`` with every mapping a dict and every list a list, all the way down."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _written(folder: Path, summary: Any, inline: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder.mkdir()
    monkeypatch.setattr(cases, "INLINE", inline)
    store.write_summary(folder, summary)
    return folder


def test_many_cases_read_back_as_one_summary_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = _summary(5)
    whole = _written(tmp_path / "whole", summary, 1_000, monkeypatch)
    split = _written(tmp_path / "split", summary, 4, monkeypatch)
    assert not (whole / store.CASES).exists() and (split / store.CASES).exists()
    on_disk = orjson.loads((split / store.SUMMARY).read_bytes())
    assert on_disk["schema"] == cases.SCHEMA and "cases" not in on_disk["pooled"]
    assert len((split / store.CASES).read_bytes().splitlines()) == 5
    read = store.read_json(split / store.SUMMARY)
    expected = _plain(store.read_json(whole / store.SUMMARY))
    expected["schema"] = cases.SCHEMA
    assert _plain(read) == expected
    assert "c00004" in read["runs"][0]["cases"] and "c00004" not in read["runs"][1]["cases"]
    assert len(read["runs"][1]["cases"]) == 4 and len(read["across_runs"]["cases"]) == 5
    with pytest.raises(KeyError):
        read["runs"][1]["cases"]["c00004"]


def test_a_damaged_line_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _written(tmp_path / "run", _summary(3), 2, monkeypatch)
    lines = (run / store.CASES).read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"tasks":1', b'"tasks":"one"')
    (run / store.CASES).write_bytes(b"".join(lines))
    read = store.read_json(run / store.SUMMARY)  # indexed by its ids; checked when read
    assert read["pooled"]["cases"]["c00000"]["tasks"] == 2  # one task in each of 2 runs
    with pytest.raises(StoreError, match=r"cases\.jsonl:2: .*tasks.*delete it and summary"):
        read["pooled"]["cases"]["c00001"]
    (run / store.CASES).unlink()
    read = store.read_json(run / store.SUMMARY)  # `history` keeps summary.json alone
    assert read["pooled"]["overall"]["tasks"] == 5
    with pytest.raises(StoreError, match=r"cases\.jsonl does not exist"):
        len(read["pooled"]["cases"])


def _read_all(run: Path) -> float:
    """What `show` does with cases: read the summary, find the slowest case by P95."""
    summary = store.read_json(run / store.SUMMARY)
    return max(figures["latency"]["p95"] for figures in summary["pooled"]["cases"].values())


def test_reading_many_cases_takes_little_a_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each case adds to a reader's peak: an offset, an id, its histograms' names in
    summary.json (~0.6 KB); with every case's figures in summary.json it was ~82 KB (set
    ``INLINE`` to 10,000 below to see it)."""
    small = _written(tmp_path / "small", _summary(200), 10, monkeypatch)
    large = _written(tmp_path / "large", _summary(2_000), 10, monkeypatch)
    _read_all(small)  # imports and caches first, so neither peak counts them
    peaks = []
    for run in (small, large):
        tracemalloc.start()
        try:
            _read_all(run)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert (peaks[1] - peaks[0]) / 1_800 < 2_000
