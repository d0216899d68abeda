"""write_json writes a large document (summary.json of 10^4 cases: ~360 MB of text) an entry
at a time at its outer levels (issue 38), with the bytes one ``orjson.dumps`` of the whole
gives: readers and diffs see the same file."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from perfbench.stats.summary import summarize
from perfbench.store.files import _JSON_OPTIONS, _plain, write_json
from tests.unit.test_summary_scopes import CASES, samples


class _Float(float):
    pass


DOCS: list[Any] = [
    {},
    [],
    {"a": {}, "b": [], "c": [1, {"d": [2, {"e": {"f": 1}}]}]},
    {1: {"x": [1.5, None, "é\n", True]}, "z": {"y": {"w": {"v": {"u": -0.0}}}}},
    [[[[1]]], []],
    {"n": np.float64(1.5), "i": np.int64(3), "f": _Float(2.5)},
    "text",
    None,
]


@pytest.mark.parametrize("doc", [*DOCS, summarize(samples(4, 120), dict.fromkeys(CASES, 60.0))])
def test_the_bytes_are_one_dumps_of_the_whole(doc: Any, tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    write_json(path, doc)
    assert path.read_bytes() == orjson.dumps(doc, default=_plain, option=_JSON_OPTIONS)


def test_a_large_document_is_not_held_as_one_text(tmp_path: Path) -> None:
    cases = {f"case-{i:05d}": {"latency": {"p50": i / 7, "p99": i / 3}} for i in range(4000)}
    doc = {"runs": [{"run": 0, "cases": cases}], "pooled": {"cases": cases}}
    size = len(orjson.dumps(doc, option=_JSON_OPTIONS))
    tracemalloc.start()
    try:
        write_json(tmp_path / "summary.json", doc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size / 4, (peak, size)
    assert (tmp_path / "summary.json").read_bytes() == orjson.dumps(doc, option=_JSON_OPTIONS)
