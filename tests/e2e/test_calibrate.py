"""`perfbench calibrate` and the ceiling warning it enables (`run --strict` → exit 7). The
calibration file goes to a temporary path (PERFBENCH_CALIBRATION) in every test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfbench.store import machine
from tests.helpers import CASES, invoke


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PERFBENCH_CALIBRATION": str(tmp / "calibration.json")}


def test_calibrate_measures_and_stores_this_machines_ceiling(tmp_path: Path) -> None:
    proc = invoke("calibrate", "--path", "in-process", "--tasks", "200", env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "calibration.json").read_text())
    figures = doc["paths"]["in-process"]
    assert figures["calls_per_s"] > 0 and figures["stream_tokens_per_s"] > 0
    assert figures["cpu_ms_per_call"] > 0 and figures["perfbench_version"]
    assert "in-process" in proc.stdout and "calls/s" in proc.stdout
    shown = invoke("calibrate", "--show", env=_env(tmp_path))
    assert shown.returncode == 0 and f"{figures['calls_per_s']:,.0f}" in shown.stdout


def test_show_without_a_calibration_says_how_to_make_one(tmp_path: Path) -> None:
    proc = invoke("calibrate", "--show", env=_env(tmp_path))
    assert proc.returncode == 3 and "run perfbench calibrate" in " ".join(proc.stderr.split())


@pytest.fixture
def tiny_ceiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An HTTP ceiling far below what any run reaches: every HTTP run is "near" it."""
    monkeypatch.setenv("PERFBENCH_CALIBRATION", str(tmp_path / "calibration.json"))
    machine.save("http", {"calls_per_s": 1.0, "cpu_ms_per_call": 1.0,
                              "stream_tokens_per_s": 10.0})  # fmt: skip


@pytest.mark.usefixtures("tiny_ceiling")
def test_a_run_near_the_calibrated_ceiling_warns_and_strict_exits_7(tmp_path: Path) -> None:
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock+http:zero", "--runs", "1", "-q"]
    args += ["--out", str(tmp_path / "runs")]
    loose = invoke(*args)
    assert loose.returncode == 0, loose.stderr
    assert "calibrated ceiling" in " ".join(loose.stdout.split())
    strict = invoke(*args, "--strict")
    assert strict.returncode == 7, strict.stderr
    assert "--strict" in strict.stdout
    run_dir = sorted((tmp_path / "runs").iterdir())[-1]
    room = json.loads((run_dir / "summary.json").read_text())["client"]["headroom"]
    assert room["share"] > 1 and room["ceiling"]["calls_per_s"] == 1.0


@pytest.mark.usefixtures("tiny_ceiling")
def test_an_in_process_run_is_not_compared_with_the_http_ceiling(tmp_path: Path) -> None:
    args = ["run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--runs", "1", "-q"]
    proc = invoke(*args, "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert "calibrated ceiling" not in " ".join(proc.stdout.split())
