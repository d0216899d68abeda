"""`run --slo` end to end: goodput in summary.json and the console, recorded in the spec, and
recomputed with it when a run's summary.json is lost."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import CASES, invoke


def test_goodput_is_reported_recorded_and_recomputed(tmp_path: Path) -> None:
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock+http", "--slo", "ttft<2s,tpot<1s",
               "--runs", "1", "--warmup", "0", "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "goodput (ttft<2s,tpot<1s): 100.0% of requests" in " ".join(done.stdout.split())
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert json.loads((run_dir / "meta.json").read_text())["spec"]["slo"] == "ttft<2s,tpot<1s"
    good = json.loads((run_dir / "summary.json").read_text())["pooled"]["overall"]["goodput"]
    assert good["task_share"] == 1.0 and good["requests"] >= good["tasks"] > 0
    report = invoke("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Requests: TPOT and goodput" in text and "`ttft<2s,tpot<1s`" in text
    (run_dir / "summary.json").unlink()  # killed before writing it: recomputed from samples
    shown = invoke("show", str(run_dir))
    assert shown.returncode == 0 and "goodput (ttft<2s,tpot<1s)" in shown.stdout, shown.stderr


def test_a_mistyped_objective_is_a_usage_error(tmp_path: Path) -> None:
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock", "--slo", "ttfb<1s",
               "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 2 and "'ttfb' is not one of ttft, tpot, e2e, latency" in done.stderr


def test_a_sweep_takes_the_same_objectives_and_names_the_largest_level_meeting_them(
    tmp_path: Path,
) -> None:
    # One spelling for both commands: run --slo's objectives, met by --attainment of the
    # tasks at a level. Every task meets a loose latency limit; none meets a TTFT of 1 µs.
    for slo, largest in (("latency<30s", "2"), ("ttft<1us", "none")):
        out = tmp_path / slo.replace("<", "-")
        done = invoke("sweep", str(CASES / "answer.yaml"), "-t", "mock", "--concurrency", "1,2",
                   "--runs", "1", "--warmup", "0", "--slo", slo, "--attainment", "0.95",
                   "--out", str(out), "-q")  # fmt: skip
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stdout.split())
        assert f"Largest level where 95% of tasks met every objective ({slo}): {largest}." in said
        (sweep_dir,) = [d for d in out.iterdir() if (d / "sweep.json").exists()]
        level_runs = [json.loads(p.read_text()) for p in sweep_dir.rglob("meta.json")]
        assert level_runs and all(m["spec"]["slo"] == slo for m in level_runs)


def test_a_percentile_given_to_run_slo_points_at_the_gate(tmp_path: Path) -> None:
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock", "--slo", "p95<2s",
               "--out", str(tmp_path))  # fmt: skip
    said = " ".join(re.sub("[│╭╮╰╯─]", " ", done.stderr).split())  # rich's usage-error box
    assert done.returncode == 2 and "compare --threshold 'p95<2s'` gates a run" in said, said
