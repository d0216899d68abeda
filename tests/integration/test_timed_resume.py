"""Resuming a run bounded by time, `-c N --duration S` or `--stages`: a pass is so many seconds
of load, not a list of tasks, so the pass a stop cut short is measured again whole (its part on
disk dropped, never counted twice), and the passes before it are kept as they are. Under
virtual time: the stop lands at an exact moment."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest
from trio.testing import MockClock
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import ExitCode, app
from perfbench.engine.session import Session
from perfbench.sample import Sample
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile


async def _stopped_at(session: Session, seconds: float) -> Path:
    """Run ``session`` and stop it (as Ctrl-C does) ``seconds`` into the run."""

    async def stop_later() -> None:
        await anyio.sleep(seconds)
        session.stop("test")

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_later)
        result = await session.run()
        tg.cancel_scope.cancel()
    assert result.meta["status"] == "interrupted" and result.run_dir is not None
    return result.run_dir


def _measured(run_dir: Path) -> list[Sample]:
    return [s for s in store.read_samples(run_dir) if s.phase == "measured"]


async def _resumed(spec: RunSpec, suite: Suite, run_dir: Path, note: str) -> list[Sample]:
    """The run resumed to its end, its samples checked; ``note``: what it says it does."""
    target = MockAgent(fixed_profile())
    session = Session(spec, suite=suite, target=target, run_dir=run_dir, resume=True)
    assert session.resume.note(spec.plan) == note
    result = await session.run()
    assert result.meta["status"] == "completed"
    samples = _measured(run_dir)
    counts = Counter(s.key for s in samples)
    assert max(counts.values()) == 1  # no task twice
    # The summary counts what samples.jsonl holds: nothing dropped, nothing twice.
    assert sum(r["overall"]["tasks"] for r in result.summary["runs"]) == len(samples)
    return samples


@pytest.mark.anyio
async def test_a_duration_run_resumed_keeps_its_ended_passes_and_reruns_the_cut_one_whole(
    example_suite: Suite, tmp_path: Path
) -> None:
    plan = Plan(runs=3, warmup=0, concurrency=8, duration_s=30.0)  # 10 s a pass
    spec = RunSpec(plan=plan, out=str(tmp_path))
    whole = await Session(spec, suite=example_suite, target=MockAgent(fixed_profile())).run()
    assert whole.run_dir is not None
    reference = _measured(whole.run_dir)  # the same plan, never stopped
    first = Session(spec, suite=example_suite, target=MockAgent(fixed_profile()))
    run_dir = await _stopped_at(first, 14.0)  # 4 s into the second pass
    before = _measured(run_dir)
    assert {s.run for s in before} == {0, 1}
    ended = [s for s in before if s.run == 0]
    cut_short = [s for s in before if s.run == 1 and s.status != "cancelled"]
    assert cut_short  # some of the second pass had finished

    note = (
        f"Resuming: run 2 was cut short and runs again whole ({len(cut_short)} finished tasks "
        "dropped): a --duration pass is time, not a task list."
    )
    after = await _resumed(spec, example_suite, run_dir, note)
    assert [s for s in after if s.run == 0] == ended  # kept as it was
    again = [s for s in after if s.run == 1]
    assert not [s for s in again if s.status == "cancelled"]  # the tasks the stop cut: gone
    # The pass again from its start, on a timeline that goes on from the last sample kept (the
    # first pass's): under virtual time the very moment the cut pass had begun.
    assert min(s.start for s in again) == pytest.approx(min(s.start for s in cut_short))
    assert min(s.start for s in again) >= max(s.end for s in ended)
    # Whole again, and as long as it was: each pass as the run never stopped measured it (its
    # share of the duration less the overrun of the pass before), so the run lasts the same.
    for run in (1, 2):
        mine = [s for s in after if s.run == run]
        unstopped = [s for s in reference if s.run == run]
        assert len(mine) == pytest.approx(len(unstopped), rel=0.05), run
        assert _span(mine) == pytest.approx(_span(unstopped), abs=0.2), run
    assert max(s.end for s in after) == pytest.approx(max(s.end for s in reference), abs=0.5)


def _span(samples: list[Sample]) -> float:
    return max(s.start for s in samples) - min(s.start for s in samples)


@pytest.mark.anyio
async def test_a_stages_run_resumed_runs_its_stages_again_from_the_start(
    example_suite: Suite, tmp_path: Path
) -> None:
    staged = ((10.0, 4), (10.0, 8), (5.0, 0))
    plan = Plan(runs=1, warmup=1, stages=staged)
    spec = RunSpec(plan=plan, out=str(tmp_path))
    whole = await Session(spec, suite=example_suite, target=MockAgent(fixed_profile())).run()
    assert whole.run_dir is not None
    reference = _measured(whole.run_dir)  # the same plan, never stopped

    began = min(s.start for s in reference)  # the warmup pass came first
    first = Session(spec, suite=example_suite, target=MockAgent(fixed_profile()))
    cut_dir = await _stopped_at(first, began + 15.0)  # in the second stage
    warmup = [s for s in store.read_samples(cut_dir) if s.phase == "warmup"]
    cut_short = [s for s in _measured(cut_dir) if s.status != "cancelled"]
    assert cut_short
    note = (
        f"Resuming: run 1 was cut short and runs again whole ({len(cut_short)} finished tasks "
        "dropped): --stages ramp from their start."
    )
    after = await _resumed(spec, example_suite, cut_dir, note)
    assert [s for s in store.read_samples(cut_dir) if s.phase == "warmup"] == warmup
    assert min(s.start for s in after) >= max(s.end for s in warmup)
    # The stages again from their start: the same number of tasks, the same peak in flight.
    assert 0.9 * len(reference) <= len(after) <= 1.1 * len(reference)
    assert max(s.concurrency for s in after) == max(s.concurrency for s in reference) == 8


def test_resume_says_in_one_line_that_the_cut_pass_runs_again_whole(tmp_path: Path) -> None:
    """`run --resume` of a --duration run stopped in its second pass, through the CLI."""
    plan = Plan(runs=3, warmup=0, concurrency=2, duration_s=1.5)  # 0.5 s a pass
    spec = RunSpec.build([CASES / "answer.yaml"], TargetSpec("mock:default"), plan,
                         out=tmp_path)  # fmt: skip
    clock = {"clock": MockClock(autojump_threshold=0)}
    run_dir = anyio.run(_stopped_at, Session(spec), 0.8, backend="trio", backend_options=clock)
    result = CliRunner().invoke(app, ["run", "--resume", str(run_dir), "-q"])
    assert result.exit_code == ExitCode.OK, result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("Resuming:")]
    assert "run 2 was cut short and runs again whole" in line and "--duration" in line
    assert store.read_meta(run_dir)["status"] == "completed"
