"""A summary recomputed from samples.jsonl (a run killed before writing summary.json) counts
each task once, as --resume keeps it: a line found twice must not count twice (found by
tests/integration/test_damaged_runs.py: a duplicated line turned compare into a regression)."""

from __future__ import annotations

from pathlib import Path

import orjson

from perfbench import store
from perfbench.sample import Sample


def _line(case: str, tokens_in: int) -> bytes:
    sample = Sample("measured", 0, case, 0, "en", 0.0, 1.0, tokens_in=tokens_in, tokens_out=1)
    return orjson.dumps(sample.to_json()) + b"\n"


def test_a_duplicated_line_counts_once_in_a_recomputed_summary(tmp_path: Path) -> None:
    short, long = _line("a", 10), _line("b", 30)
    (tmp_path / store.SAMPLES).write_bytes(short + long + long)
    meta = {"suite": {"cases": [{"id": "a", "timeout_s": 5}, {"id": "b", "timeout_s": 5}]}}
    overall = store.read_summary(tmp_path, meta)["runs"][0]["overall"]
    assert overall["tasks"] == 2
    assert overall["tokens_in"] == 20  # (10 + 30) / 2, not (10 + 30 + 30) / 3
