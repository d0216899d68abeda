"""A whole run through Session and the CLI: run directory layout, atomic meta, samples on disk
that reproduce the summary, list and show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import app
from perfbench.engine.session import Session
from perfbench.spec import Plan, RunSpec
from perfbench.stats.summary import summarize
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile


@pytest.mark.anyio
async def test_session_writes_a_complete_run_directory(
    example_suite: Suite, tmp_path: Path
) -> None:
    session = Session(
        RunSpec(plan=Plan(runs=2, warmup=1, concurrency=4), out=str(tmp_path), label="v1.0"),
        suite=example_suite,
        target=MockAgent(fixed_profile()),
    )
    result = await session.run()
    assert result.run_dir is not None and result.run_dir.parent == tmp_path
    assert result.run_dir.name.endswith("_cases_mock-default_v1.0")
    meta = json.loads((result.run_dir / store.META).read_text())
    assert meta["status"] == "completed"
    assert meta["suite"]["digest"] == example_suite.digest
    assert meta["plan"] == {
        "runs": 2,
        "warmup": 1,
        "repeat": 1,
        "concurrency": 4,
        "seed": 0,
        "load": None,
        "workers": 1,
        "ray": None,
        "ramp_up": 0.0,
        "duration_s": None,
        "stages": None,
    }
    assert meta["load"] == {"shape": "fixed", "concurrency": 4, "ramp_up_s": 0.0}
    assert meta["headline"]["tasks"] == 32 and meta["headline"]["ok"] == 32
    samples = list(store.read_samples(result.run_dir))
    assert len(samples) == 48
    assert len({s.key for s in samples}) == 48
    assert sum(s.phase == "warmup" for s in samples) == 16
    # The stored summary is exactly what the samples on disk give.
    stored = json.loads((result.run_dir / store.SUMMARY).read_text())
    timeouts = {c.id: c.timeout_s for c in example_suite.cases}
    # default=dict: each case's figures are made when read (stats/summary.CaseFigures).
    recomputed = json.loads(json.dumps(summarize(samples, timeouts), default=dict))
    client = stored.pop("client")  # about perfbench itself, not derived from the samples
    assert recomputed == stored
    assert client["loop_lag"]["max"] == 0.0  # virtual time: the loop is never late
    assert any(k.startswith("run/1/case/workflow-zh/") for k in stored["histograms"])


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    line = json.dumps(
        {
            "phase": "measured",
            "run": 0,
            "case": "a",
            "iteration": 0,
            "language": "en",
            "start": 0.0,
            "end": 1.0,
            "latency": 1.0,
        }
    )
    (tmp_path / store.SAMPLES).write_text(line + "\n" + line[:20])
    assert [s.case for s in store.read_samples(tmp_path)] == ["a"]


def test_cli_run_list_show(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "runs"
    args = [
        "run",
        str(CASES / "answer.yaml"),
        "-t",
        "mock:zero",
        "--runs",
        "2",
        "--out",
        str(out),
        "--label",
        "rc1",
        "-q",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Per case" in result.output and "answer-zh" in result.output
    assert "Run directory:" in result.output
    listed = runner.invoke(app, ["list", str(out)])
    assert listed.exit_code == 0 and "rc1" in listed.output and "completed" in listed.output
    shown = runner.invoke(app, ["show", "rc1", "--root", str(out)])
    assert shown.exit_code == 0 and "answer-ja" in shown.output


def test_show_recomputes_an_unfinished_run(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "runs"
    runner.invoke(
        app,
        [
            "run",
            str(CASES / "answer.yaml"),
            "-t",
            "mock:zero",
            "--runs",
            "1",
            "--out",
            str(out),
            "-q",
        ],
    )
    [run_dir] = list(out.iterdir())
    (run_dir / store.SUMMARY).unlink()  # as if the process died before the end
    shown = runner.invoke(app, ["show", str(run_dir)])
    assert shown.exit_code == 0 and "answer-es" in shown.output


def test_cli_errors_are_messages_with_exit_code_3(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_target = runner.invoke(app, ["run", str(CASES), "-t", "nope", "--out", str(tmp_path)])
    assert bad_target.exit_code == 3 and "unknown target 'nope'" in bad_target.output
    bad_profile = runner.invoke(app, ["run", str(CASES), "-t", "mock:nope", "--out", str(tmp_path)])
    assert bad_profile.exit_code == 3 and "default" in bad_profile.output
    missing = runner.invoke(app, ["show", "no-such-run", "--root", str(tmp_path)])
    assert missing.exit_code == 3 and "no run 'no-such-run'" in missing.output
    usage = runner.invoke(app, ["run", str(CASES), "--runs", "0"])
    assert usage.exit_code == 2


def test_ramp_up_is_checked_and_recorded_in_seconds(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["run", str(CASES), "--ramp-up", "soon", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--ramp-up takes seconds" in bad.output
    args = ["run", str(CASES), "-t", "mock:zero", "--runs", "1", "-q", "-c", "8"]
    auto = runner.invoke(app, [*args, "--workers", "1", "--out", str(tmp_path / "auto")])
    given = runner.invoke(app, [*args, "--ramp-up", "0.5s", "--out", str(tmp_path / "given")])
    assert auto.exit_code == 0 and given.exit_code == 0, auto.output + given.output
    for name, seconds in (("auto", 0.008), ("given", 0.5)):
        [run_dir] = list((tmp_path / name).iterdir())
        meta = json.loads((run_dir / store.META).read_text())
        assert meta["load"] == {"shape": "fixed", "concurrency": 8, "ramp_up_s": seconds}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["-c", "4", "--rate", "2"], "--concurrency: only for a fixed closed loop"),
        (["--adaptive", "-c", "4"], "--concurrency: only for a fixed closed loop"),
        (["--rate", "2", "--ramp-up", "1"], "--ramp-up: only for a fixed closed loop"),
        (["--start", "4", "--decrease", "0.5"], "--start, --decrease: only with --adaptive"),
        (["--arrival", "poisson"], "--arrival: only with --rate"),
    ],
)
def test_options_the_load_shape_would_ignore_are_refused(
    tmp_path: Path, given: list[str], message: str
) -> None:
    """Ignored silently, `-c 4 --rate 2` ran an open loop at 2/s and said nothing of the -c."""
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, *given], terminal_width=200)
    assert result.exit_code == 2 and message in result.output, result.output
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # nothing was run


def test_resume_refuses_options_that_would_change_the_plan(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--runs", "1", "-q"]
    assert runner.invoke(app, [*args, "--out", str(tmp_path)]).exit_code == 0
    [run_dir] = list(tmp_path.iterdir())
    changed = runner.invoke(app, ["run", "--resume", str(run_dir), "-c", "4"], terminal_width=200)
    assert changed.exit_code == 2
    assert "--resume continues the run as it was started" in changed.output
    assert "drop --concurrency" in changed.output
