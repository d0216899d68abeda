"""Readers of a run directory stay flat in memory as its samples.jsonl grows (issue 38: a
`run --resume` of 10^6 samples held them all, 1.8 GB; an export built one frame, 830 MB).

Each reader's Python peak (tracemalloc) on a run of 10 × N samples is compared with its peak on
N in the same test: holding the samples (or their keys) makes it ~10×, streaming leaves it
where its fixed state (one sample, one chunk) puts it. The reader alone: the statistics it
feeds (stats/summary.py) have their own bound. tests/bench/reader_memory.py measures the
commands' peak RSS at 10^6 samples."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from perfbench import export, store
from perfbench.engine.resume import Resume
from perfbench.sample import Sample, Step
from perfbench.spec import Plan
from perfbench.suite import Case, Suite, load_suite
from tests.helpers import CASES

SMALL, LARGE = 400, 4_000
GROWTH = 1.3  # at most this much more at 10× the samples


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite([CASES / "answer.yaml"])


def _run_dir(folder: Path, suite: Suite, n: int) -> Path:
    """A run directory of ``n`` measured samples (one run, round by round), as a run
    interrupted before summary.json leaves it."""
    folder.mkdir()
    cases = suite.cases
    with (folder / store.SAMPLES).open("wb") as fh:
        for i in range(n):
            case = cases[i % len(cases)]
            t = i * 0.001
            step = Step("model", "sim", t, 0.0005, ttft=0.0002, tokens_in=30, tokens_out=12)
            sample = Sample(
                "measured", 0, case.id, i // len(cases), case.language, t, t + 0.0007 + i % 7e-4,
                ttft=0.0002, tokens_in=30, tokens_out=12, model_calls=1, steps=[step],
            )  # fmt: skip
            fh.write(orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE))
    meta = {
        "id": folder.name,
        "status": "interrupted",
        "target": "mock",
        "suite": {"name": suite.name, "digest": suite.digest, "cases": [_case(c) for c in cases]},
    }
    (folder / store.META).write_bytes(orjson.dumps(meta))
    return folder


def _case(case: Case) -> dict[str, object]:
    return {"id": case.id, "language": case.language, "timeout_s": case.timeout_s, "tools": 0}


def _peak(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _growth(
    tmp_path: Path, suite: Suite, reader: Callable[[Path], object], sizes: tuple[int, int]
) -> float:
    small = _run_dir(tmp_path / "small", suite, sizes[0])
    large = _run_dir(tmp_path / "large", suite, sizes[1])
    reader(small)  # imports and caches first, so neither peak counts them
    return _peak(lambda: reader(large)) / _peak(lambda: reader(small))


def test_resume_reads_in_bounded_memory(tmp_path: Path, suite: Suite) -> None:
    """`run --resume` held every sample and every task's key (1.8 GB at 10^6)."""
    folded = []

    def resume(run_dir: Path) -> None:
        count = [0]

        def fold(_: Sample) -> None:
            count[0] += 1

        done = Resume.read(run_dir, suite, Plan(runs=1, warmup=0, repeat=LARGE), fold).done
        folded.append((count[0], len(done)))

    assert _growth(tmp_path, suite, resume, (SMALL, LARGE)) < GROWTH
    assert folded[-1] == (SMALL, SMALL) and folded[-2] == (LARGE, LARGE)


def test_samples_read_once_each_in_bounded_memory(tmp_path: Path, suite: Suite) -> None:
    """`show` of a run killed before summary.json recomputes it from the samples, each task
    once: the check for repeated lines kept every key."""
    cases = [c.id for c in suite.cases]

    def read(run_dir: Path) -> None:
        assert sum(1 for _ in store.unique_samples(run_dir, cases)) in (SMALL, LARGE)

    assert _growth(tmp_path, suite, read, (SMALL, LARGE)) < GROWTH


@pytest.mark.parametrize("fmt", ["parquet"])
def test_export_writes_in_bounded_memory(
    tmp_path: Path, suite: Suite, monkeypatch: pytest.MonkeyPatch, fmt: export.Format
) -> None:
    """5× the samples (pandas makes each chunk slow): one frame would grow ~5-fold."""
    monkeypatch.setattr(export, "_CHUNK", 100)  # both runs several chunks long, as at 10^6

    def write(run_dir: Path) -> None:
        export.export(export.load_run(run_dir), fmt, run_dir / f"out.{fmt}")

    assert _growth(tmp_path, suite, write, (300, 1_500)) < GROWTH


def _with_cases(run_dir: Path, copies: int) -> None:
    """Give ``run_dir`` the summary.json its samples make, each case's figures copied under
    ``copies`` more ids: a summary.json as large as a many-case run's (~36 KB of text a case)."""
    meta = orjson.loads((run_dir / store.META).read_bytes())
    summary: dict[str, Any] = dict(store.read_summary(run_dir, meta))
    for scope in (*summary["runs"], summary["pooled"], summary["across_runs"]):
        first = next(iter(scope["cases"].values()))
        scope["cases"] = {**scope["cases"], **{f"copy-{i:05}": first for i in range(copies)}}
    store.write_json(run_dir / store.SUMMARY, summary)


def test_export_does_not_read_the_summary(tmp_path: Path, suite: Suite) -> None:
    """`export` of a 10^4-case run parsed its ~360 MB summary.json (1.2 GB RSS) to write the
    samples it does not need: 10x the cases in summary.json, the same peak."""
    for name, copies in (("small", 20), ("large", 200)):
        _with_cases(_run_dir(tmp_path / name, suite, 200), copies)

    def write(run_dir: Path) -> None:
        export.export(export.load_run(run_dir), "json", run_dir / "out.json")

    write(tmp_path / "small")  # imports and caches first, so neither peak counts them
    large, small = (_peak(lambda d=tmp_path / n: write(d)) for n in ("large", "small"))
    assert large / small < GROWTH
    run = export.load_run(tmp_path / "large")  # still there when asked for
    assert run.summary is not None and "copy-00199" in run.summary["pooled"]["cases"]
