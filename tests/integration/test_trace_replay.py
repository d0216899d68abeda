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
from tests.helpers import CASES, cli

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
    done = cli("run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--trace", str(path),
               "--rate", "5", "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 2 and "--trace replays its own arrivals" in done.stderr
