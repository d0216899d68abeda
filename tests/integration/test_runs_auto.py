"""`run --runs auto` (issue 22 item 6): a run adds runs, up to a cap, until its own noise lets
compare see the change asked for; `api.extend` adds measured runs to a completed run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from perfbench import api, store
from perfbench.cli.auto import line as auto_runs_line
from perfbench.errors import StoreError
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.stats import planning
from perfbench.stats.compare import METRICS, Rules
from tests.helpers import invoke

CASE = "cases:\n  - {id: c, language: en, input: hi, timeout_s: 5}\n"


def _summary(cv: dict[str, float], runs: int) -> dict[str, Any]:
    """Runs whose gated metrics have exactly the run-to-run CV given per metric (0 elsewhere):
    values 1 + cv × z over a fixed sequence z of mean 0 and sample deviation 1."""
    raw = [(-1) ** i * (1 + i // 2) for i in range(runs)]
    mean = sum(raw) / runs
    spread = (sum((r - mean) ** 2 for r in raw) / (runs - 1)) ** 0.5
    z = [(r - mean) / spread for r in raw]
    out = []
    for i in range(runs):
        overall: dict[str, Any] = {"latency": {"n": 400}, "ttft": {"n": 400}}
        for metric in METRICS:
            value = 1.0 + z[i] * cv.get(metric.name, 0.0)
            head, _, tail = metric.path.partition(".")
            if tail:
                overall.setdefault(head, {})[tail] = value
            else:
                overall[head] = value
        out.append({"overall": overall})
    return {"runs": out}


TIMINGS = ("p50", "p95", "mean", "ttft_p50", "ttft_p95", "throughput")


def test_quiet_runs_are_enough_at_the_first_batch() -> None:
    wanted = planning.Wanted(0.2, 20, Rules())
    verdict = planning.next_runs(_summary(dict.fromkeys(TIMINGS, 0.01), 5), wanted)
    assert verdict.more is None and verdict.reached
    assert verdict.enough.runs == 5 and verdict.enough.metric in TIMINGS


def test_noisy_runs_ask_for_more_up_to_the_cap_and_then_say_it_fell_short() -> None:
    noisy = dict.fromkeys(TIMINGS, 0.06)
    uncapped = planning.next_runs(_summary(noisy, 5), planning.Wanted(0.2, 200, Rules()))
    assert uncapped.more is not None and uncapped.more > 7  # 2.5 CVs = 15% of a 20% change
    capped = planning.next_runs(_summary(noisy, 5), planning.Wanted(0.2, 7, Rules()))
    assert capped.more == 7
    at_cap = planning.next_runs(_summary(noisy, 7), planning.Wanted(0.2, 7, Rules()))
    assert at_cap.more is None and not at_cap.reached
    line = auto_runs_line(at_cap.to_doc(planning.Wanted(0.2, 7, Rules())))
    assert line.startswith("warning: --runs auto stopped at --max-runs 7")
    assert f"--max-runs {at_cap.enough.runs}" in line


def test_a_timing_too_noisy_for_any_number_of_runs_is_named_not_chased() -> None:
    cvs = {**dict.fromkeys(TIMINGS, 0.01), "ttft_p95": 0.4}
    verdict = planning.next_runs(_summary(cvs, 5), planning.Wanted(0.2, 20, Rules()))
    assert verdict.more is None and verdict.reached  # the others suffice; runs are not added
    assert [m for m, _ in verdict.enough.unreachable] == ["ttft_p95"]
    assert "TTFT P95 cannot show 20% in any number of runs" in auto_runs_line(
        verdict.to_doc(planning.Wanted(0.2, 20, Rules()))
    )


def test_a_change_within_every_threshold_says_so() -> None:
    verdict = planning.next_runs(_summary(dict.fromkeys(TIMINGS, 0.05), 5),
                                 planning.Wanted(0.05, 20, Rules()))  # fmt: skip
    assert verdict.more is None and verdict.enough.metric is None
    assert "no gated timing can be flagged" in auto_runs_line(
        verdict.to_doc(planning.Wanted(0.05, 20, Rules()))
    )


def _run(tmp_path: Path, runs: int) -> api.RunResult:
    (tmp_path / "s.yaml").write_text(CASE)
    spec = RunSpec.build([tmp_path / "s.yaml"], TargetSpec("mock:zero"),
                         Plan(runs=runs, warmup=1, repeat=2), out=tmp_path / "runs")  # fmt: skip
    return api.run(spec, interruptible=False)


def test_extend_adds_runs_after_a_warmup_pass_and_keeps_the_runs_made(tmp_path: Path) -> None:
    first = _run(tmp_path, 2)
    assert first.run_dir is not None
    before = {s.key: s.end for s in store.read_samples(first.run_dir)}
    result = api.extend(first.run_dir, 4, interruptible=False)
    assert result.meta["status"] == "completed" and len(result.summary["runs"]) == 4
    samples = list(store.read_samples(first.run_dir))
    passes = Counter((s.phase, s.run) for s in samples)
    assert passes == {("warmup", 0): 2, ("warmup", 1): 2, **{("measured", r): 2 for r in range(4)}}
    assert all(s.end == before[s.key] for s in samples if s.key in before)  # kept as measured
    meta = json.loads((first.run_dir / "meta.json").read_text())
    assert meta["plan"]["runs"] == meta["spec"]["plan"]["runs"] == 4
    assert meta["plan"]["warmup"] == 2 and len(meta["resumed"]) == 1
    with pytest.raises(StoreError, match="has 4 runs already"):
        api.extend(first.run_dir, 3, interruptible=False)


def test_extend_refuses_a_run_that_is_not_complete(tmp_path: Path) -> None:
    first = _run(tmp_path, 1)
    assert first.run_dir is not None
    meta = json.loads((first.run_dir / "meta.json").read_text())
    (first.run_dir / "meta.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    with pytest.raises(StoreError, match="perfbench run --resume"):
        api.extend(first.run_dir, 3, interruptible=False)


def test_more_runs_extends_until_the_verdict_stops_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop itself, its verdicts scripted: 2 runs → 3 → stop."""
    real = planning.next_runs
    goals = iter([3, None])

    def scripted(summary: Any, wanted: planning.Wanted) -> planning.Verdict:
        verdict = real(summary, wanted)
        return planning.Verdict(verdict.runs, next(goals), verdict.enough, verdict.detectable)

    monkeypatch.setattr(planning, "next_runs", scripted)
    result = api.more_runs(_run(tmp_path, 2), planning.Wanted(0.2, 9, Rules()))
    assert result.run_dir is not None and len(result.summary["runs"]) == 3
    recorded = json.loads((result.run_dir / "meta.json").read_text())["runs_auto"]
    assert recorded["runs"] == 3 and recorded["max_runs"] == 9 and recorded["detect"] == 0.2


def test_the_flag_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(CASE)
    done = invoke("run", str(tmp_path / "s.yaml"), "-t", "mock:zero", "--runs", "auto",
               "--repeat", "2", "--out", str(tmp_path / "runs"), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--runs auto" in done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["runs_auto"]["runs"] == meta["plan"]["runs"] >= 5
    bad = invoke("run", str(tmp_path / "s.yaml"), "-t", "mock:zero", "--runs", "0")
    assert bad.returncode == 2 and "--runs takes a positive number" in bad.stderr
    sweep = invoke("sweep", str(tmp_path / "s.yaml"), "-t", "mock:zero", "--runs", "auto",
                "--concurrency", "1,2")  # fmt: skip
    assert sweep.returncode == 2 and "--runs auto is for run" in sweep.stderr
