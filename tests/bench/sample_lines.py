"""Time to read a samples.jsonl line back as its ``Sample`` (asserts nothing; prints µs a line).

Makes a small run (`perfbench run cases/answer.yaml cases/workflow.yaml -t mock:zero`: short
lines, and lines of several steps), repeats its lines to LINES, and times, interleaved round
by round on the same lines (the best round of each, so that a loaded machine's slow rounds
drop out):

- ``pydantic``: ``store.documents.read_sample``, what perfbench reads with (pydantic's
  ``validate_json`` parses and checks in one pass, then the dataclasses are built);
- ``unchecked``: ``orjson.loads`` + ``Sample.from_json``, no check at all: the floor of any
  hand-written check on top of orjson;
- ``hand-written`` (with ``--before REV``): ``orjson.loads`` + the shape check of
  ``store/checks.py`` as it was at REV + ``Sample.from_json``, the reader pydantic replaced
  (issue 41, item 6: 3570f27).

With ``--before``, it also damages DAMAGES lines at random (a key deleted, added, or set to
another JSON value; seeded) and counts where the two readers disagree: one reads a line the
other refuses, or both read it to different samples.

Usage: python tests/bench/sample_lines.py [LINES] [--before REV]   (DAMAGES = LINES)
"""

from __future__ import annotations

import copy
import importlib.util
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from perfbench.sample import Sample
from perfbench.store.documents import read_sample

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 15


def lines_of_a_run(folder: Path, count: int) -> list[bytes]:
    cases = [str(ROOT / "cases" / name) for name in ("answer.yaml", "workflow.yaml")]
    cmd = [sys.executable, "-m", "perfbench", "run", *cases, "-t", "mock:zero", "--runs", "2",
           "--repeat", "5", "--out", str(folder), "-q"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    found = [line for f in folder.glob("*/samples.jsonl") for line in f.read_bytes().splitlines()]
    return (found * (count // len(found) + 1))[:count]


def hand_written_checks(rev: str) -> Any:
    """``store/checks.py`` at ``rev`` (before pydantic), loaded from git as a module."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:perfbench/store/checks.py"],
                          check=True, capture_output=True, text=True).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("checks_before", loader=None)
    assert spec is not None
    module: Any = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    exec(compile(text, "checks_before.py", "exec"), module.__dict__)
    return module


def hand_written(rev: str) -> Callable[[bytes], Sample]:
    """The reader before pydantic: orjson, the shape check, ``Sample.from_json``."""
    module = hand_written_checks(rev)

    def read(line: bytes) -> Sample:
        doc = orjson.loads(line)
        module.check(doc, module.SAMPLE)
        return Sample.from_json(doc)

    return read


_VALUES = [None, True, False, -1, 0, 2, 1.5, 10**30, "x", "", [], {}, [1], {"a": 1}, [[1, 2]],
           "ok", "model"]  # fmt: skip


def damaged(lines: list[bytes], count: int, seed: int = 2) -> Iterator[bytes]:
    """``count`` lines, each with one key deleted, added or set to another value."""
    rng = random.Random(seed)
    for _ in range(count):
        doc = orjson.loads(rng.choice(lines))
        parent, key = rng.choice(list(_places(doc)))
        roll = rng.random()
        if roll < 0.25 and isinstance(parent, dict):
            del parent[key]
        elif roll < 0.35 and isinstance(parent, dict):
            parent[f"extra_{key}"] = 1
        else:
            parent[key] = copy.deepcopy(rng.choice(_VALUES))
        yield json.dumps(doc).encode()  # json: orjson writes no 10**30


def _places(line: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Where a sample line holds values: its keys, its steps' keys, its gaps' items."""
    yield from ((line, key) for key in line)
    for step in line.get("steps") or ():
        yield from ((step, key) for key in step)
    for pair in line.get("itl_gaps") or ():
        yield from ((pair, index) for index in range(len(pair)))


def disagreements(old: Callable[[bytes], Sample], lines: Iterable[bytes]) -> Counter[str]:
    seen: Counter[str] = Counter()
    for line in lines:
        new_sample, old_sample = _outcome(read_sample, line), _outcome(old, line)
        if (new_sample is None) != (old_sample is None):
            seen["read by one reader only"] += 1
        elif new_sample is None:
            seen["refused by both"] += 1
        else:
            seen["read by both" + ("" if new_sample == old_sample else ", differently")] += 1
    return seen


def _outcome(read: Callable[[bytes], Sample], line: bytes) -> Sample | None:
    try:
        return read(line)
    except Exception:  # either reader's refusal (Damage, orjson's error): the line is refused
        return None


def unchecked(line: bytes) -> Sample:
    return Sample.from_json(orjson.loads(line))


def best_us(readers: dict[str, Callable[[bytes], Sample]], lines: list[bytes]) -> dict[str, float]:
    best = dict.fromkeys(readers, float("inf"))
    for _ in range(ROUNDS):
        for name, read in readers.items():
            start = time.perf_counter()
            for line in lines:
                read(line)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / len(lines) * 1e6 for name, seconds in best.items()}


def main() -> None:
    args = sys.argv[1:]
    rev = args.pop(args.index("--before") + 1) if "--before" in args else None
    count = int(args[0]) if args and args[0] != "--before" else 3000
    readers: dict[str, Callable[[bytes], Sample]] = {
        "pydantic": read_sample,
        "unchecked": unchecked,
    }
    if rev is not None:
        readers["hand-written"] = hand_written(rev)
    with tempfile.TemporaryDirectory() as tmp:
        lines = lines_of_a_run(Path(tmp), count)
    results = {name: [read(line) for line in lines] for name, read in readers.items()}
    same = all(r == results["pydantic"] for r in results.values())
    print(f"{len(lines)} lines, best of {ROUNDS} rounds; all readers equal: {same}")
    times = best_us(readers, lines)
    for name, us in times.items():
        ratio = us / times["pydantic"]
        print(f"  {name:<13} {us:7.1f} µs a line  ({ratio:.2f}× pydantic's time)")
    if rev is not None:
        seen = disagreements(readers["hand-written"], damaged(lines, len(lines)))
        print(f"{len(lines)} damaged lines: {dict(seen)}")


if __name__ == "__main__":
    main()
