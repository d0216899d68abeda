"""`run --trace FILE` (issue 23 item 4): recorded arrival times replayed as an open loop, with
the same coordinated-omission accounting as --rate (each sample keeps its intended start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench import api, store
from perfbench.load import Rate
from perfbench.load.trace import TraceError, read
from perfbench.spec import Plan, RunSpec, TargetSpec
from tests.helpers import CASES, invoke

TRACE = [{"timestamp": 5000}, {"timestamp": 5100, "input_length": 7}, {"timestamp_s": 5.15},
         {"timestamp": 5500}, {"timestamp": 6000}]  # fmt: skip


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_trace_is_read_as_sorted_offsets_from_its_first_arrival(tmp_path: Path) -> None:
    shuffled = [TRACE[3], TRACE[0], TRACE[4], TRACE[2], TRACE[1]]
    offsets = read(_write(tmp_path / "t.jsonl", shuffled))
    assert offsets == pytest.approx((0.0, 0.1, 0.15, 0.5, 1.0))


@pytest.mark.parametrize(
    ("line", "said"),
    [("{", "t.jsonl:2: not JSON"), ('{"t": 1}', "t.jsonl:2: no timestamp"),
     ('{"timestamp": "soon"}', "is not a number"), ('{"timestamp": -1}', "is negative")],
)  # fmt: skip
def test_a_bad_line_is_named_with_its_file_and_line(tmp_path: Path, line: str, said: str) -> None:
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0}\n' + line + "\n")
    with pytest.raises(TraceError, match=said):
        read(tmp_path / "t.jsonl")


def test_each_pass_replays_the_trace_at_its_times(tmp_path: Path) -> None:
    offsets = read(_write(tmp_path / "t.jsonl", TRACE))
    plan = Plan(runs=2, warmup=0, load=Rate(5.0, trace=offsets))
    spec = RunSpec.build([CASES / "answer.yaml"], TargetSpec("mock:zero"), plan,
                         out=tmp_path / "runs")  # fmt: skip
    result = api.run(spec, interruptible=False)
    assert result.run_dir is not None
    for run in (0, 1):
        starts = sorted(s.scheduled for s in store.read_samples(result.run_dir) if s.run == run)
        assert [b - starts[0] for b in starts] == pytest.approx(list(offsets), abs=1e-9)
    recorded = json.loads((result.run_dir / "meta.json").read_text())["spec"]["plan"]["load"]
    assert recorded["trace"] == pytest.approx(list(offsets))  # a worker or --resume replays it


def test_the_flag_refuses_a_second_load_shape(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", TRACE)
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--trace", str(path),
               "--rate", "5", "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 2 and "--trace replays its own arrivals" in done.stderr


# A Mooncake-shaped trace: lengths in tokens, and the ids of 512-token blocks, the first two
# shared by the first two requests (a common prefix for the server's cache).
SHAPED = [
    {"timestamp": 0, "input_length": 1100, "output_length": 12, "hash_ids": [1, 2, 3]},
    {"timestamp": 40, "input_length": 1300, "output_length": 7, "hash_ids": [1, 2, 4]},
    {"timestamp": 90, "input_length": 60, "output_length": 5, "hash_ids": [9]},
    {"timestamp": 20, "input_length": 33, "output_length": 3},  # out of order: sorted
]


def test_a_shaped_trace_makes_prompts_of_its_lengths_sharing_its_blocks(tmp_path: Path) -> None:
    from perfbench.load.trace import arrivals
    from perfbench.sources import trace as shapes
    from perfbench.sources.tokenizer import Tokenizer

    path = _write(tmp_path / "t.jsonl", SHAPED)
    found = arrivals(path)
    assert [a.line for a in found] == [1, 4, 2, 3]  # by time; each keeps its line
    made = shapes.prompts(found, path)
    tokenizer = Tokenizer()
    assert [tokenizer.count(p.text) for p in made] == [1100, 33, 1300, 60]
    assert [p.output_tokens for p in made] == [12, 3, 7, 5]
    first, second = made[0].text, made[2].text
    shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    assert tokenizer.count(first[:shared]) >= 2 * shapes.BLOCK_TOKENS  # blocks 1 and 2
    assert shapes.prompts(found, path) == made  # the same trace, the same prompts


def test_a_shaped_trace_runs_with_no_cases_one_case_per_arrival(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", SHAPED)
    done = invoke("run", "--trace", str(path), "-t", "mock+http", "--runs", "1", "--warmup", "0",
               "--out", str(tmp_path / "runs"), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = store.read_meta(run_dir)
    assert meta["spec"]["cases"] == [f"trace:{path.resolve()}"]  # workers, --resume redo it
    samples = sorted(store.read_samples(run_dir), key=lambda s: s.scheduled or 0.0)
    assert [s.case for s in samples] == ["trace-0001", "trace-0002", "trace-0003", "trace-0004"]
    # The n-th arrival runs the n-th case, at the trace's time; the mock honours each length.
    t0 = samples[0].scheduled or 0.0
    assert [round((s.scheduled or 0.0) - t0, 3) for s in samples] == [0.0, 0.02, 0.04, 0.09]
    assert [s.tokens_out for s in samples] == [12, 3, 7, 5]


def test_lengths_are_not_used_with_cases_and_a_trace_without_them_needs_cases(
    tmp_path: Path,
) -> None:
    shaped = _write(tmp_path / "shaped.jsonl", SHAPED)
    done = invoke("run", str(CASES / "answer.yaml"), "--trace", str(shaped), "-t", "mock:zero",
               "--runs", "1", "--warmup", "0", "--out", str(tmp_path / "runs"), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "which is not used when cases are given" in " ".join(done.stderr.split())
    bare = _write(tmp_path / "bare.jsonl", [{"timestamp": 0}, {"timestamp": 5}])
    done = invoke("run", "--trace", str(bare), "-t", "mock:zero", "--out", str(tmp_path / "r2"))
    assert done.returncode != 0 and "its lines give no input_length" in done.stderr
