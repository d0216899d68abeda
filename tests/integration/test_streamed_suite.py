"""A generated suite streams into the run (issue 38): the first task starts before the last
prompt is made, no pass holds every case, each pass makes the same cases again (the digest
checks it), and meta.json's digest and case list, filled as the run ends, are those of the
suite made whole. An interrupted run, whose meta.json has no digest yet, resumes."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perfbench import api
from perfbench import suite as suite_module
from perfbench.engine import runner as runner_module
from perfbench.engine.observer import RunObserver
from perfbench.errors import SuiteError
from perfbench.sample import Sample
from perfbench.sources import Prompt, synthetic
from perfbench.spec import SYNTHETIC, Plan, RunSpec, TargetSpec
from perfbench.suite import Case, Streamed, Suite, synthetic_suite, trace_suite

N = 300
SPEC = f"input=16,output=4,n={N},seed=4"


@pytest.fixture(autouse=True)
def _streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These suites stream (ones of a few thousand prompts are made whole first)."""
    monkeypatch.setattr(suite_module, "HELD_UP_TO", 0)


def test_a_small_generated_suite_is_made_first_and_a_large_one_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(suite_module, "HELD_UP_TO", 10)
    held, streamed = (
        synthetic_suite("input=8,output=2,n=10"),
        synthetic_suite("input=8,output=2,n=11"),
    )
    assert isinstance(held.cases, tuple) and isinstance(streamed.cases, Streamed)
    assert held.digest == Suite.of("ten", list(streamed.cases)[:10]).digest


class _Counted:
    """How many prompts the synthetic source has made, and the live cases when asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made = 0
        stream = synthetic.stream

        def counted(spec: synthetic.Spec) -> Iterator[Prompt]:
            for prompt in stream(spec):
                self.made += 1
                yield prompt

        monkeypatch.setattr(synthetic, "stream", counted)


def _live_cases() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Case)


def _spec(out: Path, **plan: Any) -> RunSpec:
    return RunSpec.build([SYNTHETIC + SPEC], TargetSpec("mock:zero"), Plan(**plan), out=out)


def _samples(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "samples.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_the_first_task_starts_before_the_last_prompt_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted(monkeypatch)
    seen: dict[str, int] = {}  # prompts made when the first and the last task started
    start = runner_module.Runner._start

    def started(self: runner_module.Runner, case: Case, *rest: Any) -> Any:
        if not seen:
            seen["first"] = counted.made
        if case.id.endswith(f"{N:04d}"):
            gc.collect()
            seen["live"] = _live_cases()
        return start(self, case, *rest)

    monkeypatch.setattr(runner_module.Runner, "_start", started)
    result = api.run(_spec(tmp_path / "runs", runs=1, warmup=0), interruptible=False)
    assert result.meta["status"] == "completed"
    # The set-up made the first case (to refuse a bad spec there); the pass, the rest.
    assert seen["first"] < 5, seen
    assert counted.made == N + 1
    # At the pass's last task, the cases in memory are a few, not the suite's 300.
    assert seen["live"] < 20, seen


def test_passes_stream_the_same_cases_and_meta_records_the_whole_suite(tmp_path: Path) -> None:
    result = api.run(_spec(tmp_path / "runs", runs=2, warmup=1, repeat=2), interruptible=False)
    assert result.run_dir is not None
    samples = _samples(result.run_dir)
    keys = {(s["phase"], s["run"], s["case"], s["iteration"]) for s in samples}
    assert len(samples) == len(keys) == 3 * 2 * N  # three passes, each case twice
    held = Suite.of("held", list(synthetic_suite(SPEC).cases))
    meta = json.loads((result.run_dir / "meta.json").read_text("utf-8"))
    assert meta["suite"]["digest"] == held.digest  # as the suite made whole hashes
    assert [c["id"] for c in meta["suite"]["cases"]] == [c.id for c in held.cases]
    assert meta["suite"]["cases"][0] == {
        "id": "syn-0001", "language": "en", "tags": [], "tools": 0, "timeout_s": 60.0,
        "output_tokens": 4,
    }  # fmt: skip


def test_a_timed_run_that_reads_a_few_cases_still_records_the_digest(tmp_path: Path) -> None:
    result = api.run(
        _spec(tmp_path / "runs", runs=1, warmup=0, duration_s=0.05), interruptible=False
    )
    assert result.meta["status"] == "completed"
    assert result.meta["suite"]["digest"] == synthetic_suite(SPEC).digest
    assert len(result.meta["suite"]["cases"]) == N


def test_cases_made_again_differently_are_refused() -> None:
    made = iter([["a-1", "a-2"], ["a-1", "a-3"]])

    def cases() -> list[Case]:
        return [Case(id=i, input="x", language="en") for i in next(made)]

    streamed = Streamed(["a-1", "a-2"], cases, 60.0)
    assert [c.id for c in streamed] == ["a-1", "a-2"]
    with pytest.raises(SuiteError, match="differ from the first"):
        list(streamed)


class _StopAfter(RunObserver):
    def __init__(self, count: int) -> None:
        self.count, self.seen = count, 0
        self.stop: Any = None

    def controls(self, stop: Any) -> None:
        self.stop = stop

    def wants_samples(self) -> bool:
        return True

    def sample(self, sample: Sample) -> None:
        self.seen += 1
        if self.seen == self.count:
            self.stop("test")


def test_an_interrupted_run_resumes_and_ends_with_the_digest(tmp_path: Path) -> None:
    first = api.run(_spec(tmp_path / "runs", runs=1, warmup=0), _StopAfter(40), interruptible=False)
    assert first.meta["status"] == "interrupted" and first.run_dir is not None
    assert first.meta["suite"]["digest"] == ""  # its cases were not all made
    samples = _samples(first.run_dir)
    assert 40 <= len(samples) < N
    # Its case list is of the cases made so far: every one measured (show lists them).
    listed = [c["id"] for c in first.meta["suite"]["cases"]]
    assert {s["case"] for s in samples} <= set(listed) and len(listed) < N
    result = api.resume(first.run_dir, interruptible=False)
    assert result.meta["status"] == "completed"
    assert result.meta["suite"]["digest"] == synthetic_suite(SPEC).digest
    cases = sorted(s["case"] for s in _samples(first.run_dir) if s["status"] == "ok")
    assert cases == [c.id for c in synthetic_suite(SPEC).cases]  # each once


def _trace(path: Path, lines: list[dict[str, int]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path


def test_a_shaped_trace_streams_its_cases_and_digests_them_as_held(tmp_path: Path) -> None:
    lines = [{"timestamp": 10 * k, "input_length": 20 + k, "output_length": 3} for k in range(30)]
    suite = trace_suite(_trace(tmp_path / "t.jsonl", lines))
    assert isinstance(suite.cases, Streamed) and len(suite.cases) == 30
    held = Suite.of("held", list(suite.cases))
    assert suite.digest == held.digest
    assert suite.sources["trace-0030"].endswith("t.jsonl:30")


def test_a_trace_line_without_a_length_is_refused_before_the_run(tmp_path: Path) -> None:
    lines = [{"timestamp": 10 * k, "input_length": 20, "output_length": 3} for k in range(30)]
    del lines[25]["input_length"]  # deep in the trace: found before the first case runs
    with pytest.raises(SuiteError) as caught:
        trace_suite(_trace(tmp_path / "t.jsonl", lines))
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (26, "input_length")
    assert "is missing" in problem.message


def test_a_target_s_check_reads_the_first_generated_case_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Generated cases differ only in id, text and lengths: what a target refuses (tools,
    turns) the first one shows; checking each would make the suite before the run."""
    from perfbench.apis.chat import check_suite

    counted = _Counted(monkeypatch)
    suite = synthetic_suite(SPEC)
    refused: list[str] = []

    class Api:
        def refuse(self, case: Case) -> None:
            refused.append(case.id)

    check_suite(Api(), suite)
    assert refused == ["syn-0001"]
    assert counted.made <= 2  # the set-up's first case, and the check's


def test_a_refused_run_does_not_make_the_suite_for_its_meta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run refused before its first task (its target down) lists the cases it made, not
    the suite made whole: only a completed run's meta.json is worth a reading."""
    import socket

    from perfbench.errors import PerfbenchError

    counted = _Counted(monkeypatch)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the run connects
    target = TargetSpec("openai/m", base_url=f"http://127.0.0.1:{port}/v1", retries=0)
    spec = RunSpec.build([SYNTHETIC + SPEC], target, Plan(runs=1, warmup=0), out=tmp_path)
    with pytest.raises(PerfbenchError, match="pre-flight"):
        api.run(spec, interruptible=False)
    (run_dir,) = tmp_path.iterdir()
    meta = json.loads((run_dir / "meta.json").read_text("utf-8"))
    assert meta["status"] == "refused" and meta["suite"]["digest"] == ""
    assert counted.made <= 2  # the set-up's first case (and the check's)
