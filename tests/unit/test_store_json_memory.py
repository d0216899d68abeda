"""summary.json of a many-case run is written without a copy of the document in small
strings (issue 38: the stdlib's indenting encoder held ~5 bytes for every byte written)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np

from perfbench.store.files import write_json


def _many_cases(n: int) -> dict[str, object]:
    return {
        "cases": {
            f"case-{i}": {"latency": {"n": i, "p50": 0.001 * i, "method": "exact"}, "ok": True}
            for i in range(n)
        },
        "none": None,
        "text": "é ✓",
    }


def test_write_json_round_trips(tmp_path: Path) -> None:
    doc = _many_cases(3)
    path = tmp_path / "summary.json"
    write_json(path, doc)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == doc
    assert text.endswith("}\n") and '\n  "cases": {\n' in text  # indented, one key a line
    assert "é ✓" in text  # UTF-8, not \\u escapes


def test_numpy_numbers_are_written_as_numbers(tmp_path: Path) -> None:
    class Seconds(float):
        pass

    path = tmp_path / "summary.json"
    write_json(path, {"p50": np.float64(0.25), "n": np.int64(3), "s": Seconds(1.5)})
    assert json.loads(path.read_text(encoding="utf-8")) == {"p50": 0.25, "n": 3, "s": 1.5}


def test_write_json_holds_little_beyond_the_bytes_it_writes(tmp_path: Path) -> None:
    doc = _many_cases(5000)
    path = tmp_path / "summary.json"
    tracemalloc.start()
    try:
        write_json(path, doc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # orjson: the output and its growing buffer, ~2.8x; the stdlib's chunks were ~8.5x.
    assert peak < 4 * path.stat().st_size
