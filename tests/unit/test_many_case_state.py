"""Per-case statistics state in a run of many cases with few tasks each (issue 38): a case's
histograms hold what was recorded, not empty buffers; pooling one run shares its figures;
equal spreads across runs are one dict. The summary's figures are those of the plain way."""

from __future__ import annotations

import gc
import math
import random
import tracemalloc
from array import array
from typing import Any

import orjson
import pytest

from perfbench.sample import Sample
from perfbench.stats.histogram import Histogram
from perfbench.stats.summary import RunScopes, Summarizer, _numbers, _spread
from tests.unit.test_summary_scopes import CASES, plain, same, samples


def _bytes(make: Any) -> int:
    """Bytes still held by what ``make()`` returns."""
    gc.collect()
    tracemalloc.start()
    try:
        kept = make()
        held = tracemalloc.get_traced_memory()[0]
        del kept
        return held
    finally:
        tracemalloc.stop()


def test_an_empty_histogram_holds_no_buffer() -> None:
    # Two arrays and ten slots each made 22 × ~300 B of a case's state before anything;
    # now three slots (~57 B and a list's pointer).
    per = _bytes(lambda: [Histogram() for _ in range(1000)]) / 1000
    assert per < 90, per


def _one_task_cases(seed: int) -> list[Sample]:
    """1,000 samples, each of a case of its own."""
    items = samples(seed, 1000)
    for k, s in enumerate(items):
        s.case = f"c{k}"
    return items


def _filled(items: list[Sample]) -> RunScopes:
    scopes = RunScopes()
    for s in items:
        scopes.add(s, 60.0)
    return scopes


def test_a_case_of_one_task_is_small() -> None:
    """One sample in each of 1,000 cells: ~9.6 KB a cell before (22 histograms with their
    empty buffers and ten slots, a ``__dict__`` per group), ~3.8 KB after, ~1.9 KB now (a
    scope's distributions in one set: distributions.py)."""
    items = _one_task_cases(3)
    per = _bytes(lambda: _filled(items)) / len(items)
    assert per < 2600, per


def _values(metrics: Any) -> int:
    """How many values ``metrics``' distributions hold (the ``n`` of each summary)."""
    if not isinstance(metrics, dict):
        return 0
    if "method" in metrics:
        return int(metrics["n"])
    return sum(_values(v) for v in metrics.values())


def test_a_case_holds_about_what_it_recorded() -> None:
    """A case's state grows with what it recorded, not with how many distributions a scope
    can have (issue 38): measured against the plainest store of the same values, an array
    of them per case, in the same test. Each distribution a Histogram of its own (with a
    one-value array when it had one) was ~16 times that; its first value in one array per
    scope, a histogram from its second, ~8 (these tasks have up to three model calls)."""
    items = _one_task_cases(4)
    held = _bytes(lambda: _filled(items))
    counts = [_values(g.finish(10.0)) for g in _filled(items).cells.values()]
    assert sum(counts) > 10 * len(items)  # ~15 a task: latency, time split, TTFT, TPOT...
    plain = _bytes(lambda: [array("d", bytes(8 * n)) for n in counts])
    assert held < 11 * plain, (held / len(items), plain / len(items))


def test_a_case_that_never_failed_holds_no_failure_table() -> None:
    """Failures and the models that answered are tables made at their first entry (two
    empty dicts were 160 B of every case); one run's figures are those of the plain way."""
    items = _one_task_cases(5)
    scopes = _filled(items)
    quiet = [
        g for (case, _, _), g in scopes.cells.items()
        if next(s for s in items if s.case == case).status == "ok"
    ]  # fmt: skip
    assert quiet and all(g.failures is None for g in quiet)
    assert any(g.served is None for g in quiet) and any(g.served for g in quiet)
    summarizer = Summarizer({})
    for s in items:
        summarizer.add(s)
    overall = summarizer.finish()["runs"][0]["overall"]
    failed = [s for s in items if s.status != "ok" and s.error_kind]
    assert sum(f["count"] for f in overall["failures"].values()) == len(failed)
    finished = [s for s in items if s.status != "cancelled"]  # a cancelled task: counted only
    assert overall["models_served"] == {"other": sum(s.model_served == "other" for s in finished)}


@pytest.mark.parametrize("n", [1, 3, 40])
def test_exact_and_hdr_paths_give_the_same_percentiles(n: int) -> None:
    """A case's few values kept exact, and the same values in HDR from the first (the path
    of a case with many): the same P50 and P99 within HDR's 3 significant figures."""
    rng = random.Random(n)
    values = [rng.lognormvariate(-3, 1) for _ in range(n)]
    exact, hdr = Histogram(), Histogram(exact_limit=0)
    for v in values:
        exact.add(v)
        hdr.add(v)
    assert exact.exact and not hdr.exact
    for p, want in exact.percentiles((50.0, 99.0)).items():
        assert hdr.percentiles((p,))[p] == pytest.approx(want, rel=1e-3)
    assert hdr.mean == pytest.approx(exact.mean, rel=1e-12)


def test_cells_of_one_value_merge_into_the_run_losslessly() -> None:
    rng = random.Random(5)
    values = [rng.uniform(0.01, 2.0) for _ in range(500)]
    cells = []
    for v in values:
        cell = Histogram()
        cell.add(v)
        cells.append(cell)
    run = Histogram()
    for cell in cells:
        run.merge(cell)
    whole = Histogram()
    for v in values:
        whole.add(v)
    assert run.exact and run.summary() == whole.summary()
    for cell, v in zip(cells, values, strict=True):
        assert cell.percentiles((50.0, 99.0)) == {50.0: v, 99.0: v}


def test_an_empty_histogram_merges_and_pickles_as_empty() -> None:
    import pickle

    h, empty = Histogram(), Histogram()
    h.merge(empty)
    assert h.count == 0 and h.summary() is None and h.min is None and h.mean is None
    h.add(0.5)
    h.merge(pickle.loads(pickle.dumps(Histogram())))
    assert h.summary() == pickle.loads(pickle.dumps(h)).summary()
    assert h.percentiles((50.0,)) == {50.0: 0.5}


def test_pooling_one_run_is_that_run_s_figures() -> None:
    items = samples(11, 300)
    summarizer = Summarizer({c: 60.0 for c in CASES})
    for s in items:
        summarizer.add(s)
    summary = summarizer.finish()
    run, pooled = summary["runs"][0], summary["pooled"]
    same(pooled, plain(items))
    assert {k: v for k, v in run.items() if k != "run"} == pooled
    assert pooled["cases"] is run["cases"]  # shared: 10^5 cases' figures once, not twice


def _spread_plain(values: list[dict[str, Any]]) -> dict[str, Any]:
    flat: dict[str, list[float]] = {}
    for metrics in values:
        for key, v in _numbers(metrics):
            flat.setdefault(key, []).append(v)
    return {
        k: {"median": sorted(vs)[(len(vs) - 1) // 2] if len(vs) % 2 else None,
            "min": min(vs), "max": max(vs), "n": len(vs)}
        for k, vs in flat.items()
    }  # fmt: skip


def test_equal_spreads_are_one_dict_and_write_as_before() -> None:
    items = samples(12, 200)
    summarizer = Summarizer({c: 60.0 for c in CASES})
    for s in items:
        summarizer.add(s)
    summary = summarizer.finish()
    spreads = summary["across_runs"]["cases"]
    per_run = summary["runs"][0]["cases"]
    for case, figures in spreads.items():
        want = _spread_plain([per_run[case]])  # one run: the median is the value
        assert orjson.dumps(figures) == orjson.dumps(want)
    one = _spread([{"p50": 0.25, "max": 0.25, "n": 1.0}])
    assert one["p50"] is one["max"]  # a one-task case: its P50 is its max, one dict


def test_a_negative_zero_keeps_its_sign() -> None:
    got = _spread([{"x": 0.0, "y": -0.0}])
    assert orjson.dumps(got) == b'{"x":{"median":0.0,"min":0.0,"max":0.0,"n":1},' \
        b'"y":{"median":-0.0,"min":-0.0,"max":-0.0,"n":1}}'  # fmt: skip
    assert math.copysign(1, got["y"]["min"]) == -1


@pytest.mark.parametrize("value", [0.0, -0.0, 0.25, 3600.5])
def test_a_one_value_summary_is_the_general_one(value: float) -> None:
    h = Histogram()
    h.add(value)
    want = {"n": 1, "min": h.min, "max": h.max, "mean": h.mean, "stddev": None}
    want.update({f"p{p:g}".replace(".", "_"): v for p, v in h.percentiles().items()})
    want["method"] = "exact"
    got = h.summary()
    assert got == want and list(got or {}) == list(want)
    assert orjson.dumps(got) == orjson.dumps(want)


def test_a_closed_run_keeps_each_case_s_figures_packed() -> None:
    """What ``finish`` adds to the run's cells, a case: ~15 KB of figures and spreads as dicts
    before (10^5 cases: 1.5 GB), ~1 KB packed now (test_summary_scopes: the same figures)."""
    items = samples(13, 1000)
    for k, s in enumerate(items):
        s.case = f"c{k}"
    summarizer = Summarizer({s.case: 60.0 for s in items})
    for s in items:
        summarizer.add(s)
    per = _bytes(summarizer.finish) / len(items)
    assert per < 2500, per
