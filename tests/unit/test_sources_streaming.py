"""Data-file sources read in bounded memory (issue 38): prompt files, ShareGPT JSONL and trace
shapes give their prompts one at a time, and ``n`` takes the same seeded sample it took when
the whole file was held."""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from perfbench.load.trace import Arrival
from perfbench.sources import Prompt, SourceError, files, sharegpt, trace
from perfbench.sources.files import PromptFile
from perfbench.sources.selection import pick
from perfbench.sources.sharegpt import ShareGpt
from perfbench.suite import Suite, load_suite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sources"


def visited(
    total: int, make: Callable[[int], Prompt | None], n: int, seed: int
) -> tuple[list[Prompt], int]:
    """The selection as it was made with the whole file held: entries visited in the seeded
    shuffled order until ``n`` pass, then put back in file order. And how many were made."""
    order = list(range(total))
    random.Random(seed).shuffle(order)
    taken: list[tuple[int, Prompt]] = []
    for made, i in enumerate(order, start=1):
        prompt = make(i)
        if prompt is not None:
            taken.append((i, prompt))
            if len(taken) == n:
                return [p for _, p in sorted(taken, key=lambda t: t[0])], made
    raise SourceError(("n",), "fewer")


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize(
    ("total", "n", "passing"),
    [(1, 1, 1.0), (50, 50, 1.0), (500, 7, 0.3), (2000, 40, 0.8), (300, 60, 0.25)],
)
def test_n_takes_the_sample_the_shuffled_visit_took(
    seed: int, total: int, n: int, passing: float
) -> None:
    passes = random.Random(f"filter:{seed}:{total}")
    kept = {i for i in range(total) if passes.random() < passing}

    def make(i: int) -> Prompt | None:
        return Prompt(f"p{i}") if i in kept else None

    calls = 0

    def counted(i: int) -> Prompt | None:
        nonlocal calls
        calls += 1
        return make(i)

    want, made_then = visited(total, make, n, seed)
    got = list(pick(total, (partial(counted, i) for i in range(total)), n=n, seed=seed))
    assert got == want
    # Made only while an entry could still be taken: near what the visit made, not every one.
    if total >= 500:
        assert calls < total / 3
        assert calls >= made_then * passing


def test_fewer_passing_than_n_says_how_many_pass() -> None:
    entries = (partial(lambda i: Prompt("x") if i % 4 == 0 else None, i) for i in range(40))
    with pytest.raises(SourceError, match="10 of its 40 entries pass"):
        list(pick(40, entries, n=11, seed=0))


def _jsonl(path: Path, rows: int) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            text = f"Summarise item {i} of the quarterly report in two sentences, please."
            out.write(json.dumps({"prompt": text, "id": f"r{i}", "output_tokens": 16}) + "\n")
    return path


def _sharegpt(path: Path, rows: int) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            talk = [
                {"from": "human", "value": f"Question {i}: how do tides work, in short?"},
                {"from": "gpt", "value": f"Answer {i}: the moon's pull, mostly."},
            ]
            out.write(json.dumps({"id": f"c{i}", "conversations": talk}) + "\n")
    return path


def _sharegpt_list(path: Path, rows: int) -> Path:
    """The same conversations as one JSON list, ShareGPT's own format."""
    lines = _sharegpt(path.with_suffix(".jsonl"), rows).read_text("utf-8").splitlines()
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", "utf-8")
    return path


def _arrivals(rows: int) -> Iterator[Arrival]:
    for i in range(rows):
        yield Arrival(i / 10, input_length=24, output_length=4, hash_ids=(i % 3, i), line=i + 1)


def peak(prompts: Callable[[], Iterator[Prompt]]) -> int:
    """The most memory (bytes, tracemalloc) taken while every prompt is read and dropped."""
    gc.collect()
    tracemalloc.start()
    try:
        for _ in prompts():
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


SMALL, LARGE = 1_000, 8_000


def _sources(tmp: Path) -> dict[str, Callable[[int], Callable[[], Iterator[Prompt]]]]:
    """Each source as: rows -> what reads its prompts."""
    return {
        "prompts": lambda rows: partial(
            files.stream, PromptFile(path=str(_jsonl(tmp / f"p{rows}.jsonl", rows))), tmp
        ),
        "prompts with n": lambda rows: partial(
            files.stream, PromptFile(path=str(_jsonl(tmp / f"q{rows}.jsonl", rows)), n=20), tmp
        ),
        "sharegpt": lambda rows: partial(
            sharegpt.stream, ShareGpt(path=str(_sharegpt(tmp / f"s{rows}.jsonl", rows))), tmp
        ),
        "sharegpt with n": lambda rows: partial(
            sharegpt.stream,
            ShareGpt(path=str(_sharegpt(tmp / f"t{rows}.jsonl", rows)), n=20, max_input=40),
            tmp,
        ),
        "sharegpt list with n": lambda rows: partial(
            sharegpt.stream,
            ShareGpt(path=str(_sharegpt_list(tmp / f"l{rows}.json", rows)), n=20),
            tmp,
        ),
        "trace": lambda rows: partial(trace.stream, _arrivals(rows), tmp / "trace.jsonl"),
    }


@pytest.mark.parametrize("kind", list(_sources(Path())))
def test_reading_a_source_holds_no_more_for_a_larger_file(tmp_path: Path, kind: str) -> None:
    """8 times the rows, about the same memory: each prompt is read, given and let go (with
    ``n``, the shuffle's ranks, 16 bytes a row, and the n kept). Holding the rows, as the
    sources did, took ~0.7-1.7 KB a row; a trace keeps its blocks' texts, here three."""
    reader = _sources(tmp_path)[kind]
    small, large = reader(SMALL), reader(LARGE)
    peak(small)  # the tokenizer and the encoder's caches, loaded once
    grown = peak(large) - peak(small)
    assert grown / (LARGE - SMALL) < 40  # bytes a row


def test_a_sharegpt_list_written_a_conversation_a_line_gives_the_same_suite(
    tmp_path: Path,
) -> None:
    """The same conversations as a list or a line each take the same sample (the same
    digest), as docs/workloads.md says."""
    listed = json.loads((FIXTURES / "sharegpt.json").read_text("utf-8"))
    lines = tmp_path / "sg.jsonl"
    lines.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in listed), "utf-8")

    def suite(path: Path) -> Suite:
        workload = tmp_path / f"{path.stem}-{path.suffix[1:]}.yaml"
        source = {"sharegpt": {"path": str(path), "n": 3, "seed": 4}}
        workload.write_text(json.dumps({"source": source}), "utf-8")
        return load_suite([workload])

    whole, streamed = suite(FIXTURES / "sharegpt.json"), suite(lines)
    assert [c.input for c in streamed.cases] == [c.input for c in whole.cases]
    assert streamed.digest == whole.digest
