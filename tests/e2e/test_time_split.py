"""A task's time split (stats/breakdown.py) on a real `cmd:` agent: it sleeps a known time,
then makes two model calls against a mock with a fixed TTFT and token gap. The console and
summary.json show agent time ≈ its sleep (plus its interpreter's start-up, measured here as a
reference) and model time ≈ the mock's; compare of a run whose agent slept longer names the
agent's own time as the part that moved. Loopback only; 2 × 3 tasks a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CASES, cli, invoke

AGENT = Path(__file__).resolve().parent.parent / "fixtures" / "agents" / "sleepy_agent.py"
PROFILE = """name: fixed
ttft_ms: 200
itl_ms: 10
output_chars: 40
tool_latency_scale: 0
models:
  sim:
    tokens_per_char: {default: 0.25}
"""
# 10 tokens: the first at 200 ms, 9 gaps of 10 ms → a call's model time ≈ 290 ms.
CALL = 0.290


def _run(tmp: Path, sleep_ms: int, label: str) -> tuple[Path, str]:
    profile = tmp / "fixed.yaml"
    profile.write_text(PROFILE)
    out = tmp / "runs"
    done = cli("run", str(CASES / "answer.yaml"), "-t", f"cmd:{sys.executable} {AGENT} {sleep_ms}",
               "--upstream", f"mock+http:{profile}", "--runs", "3", "--warmup", "0",
               "--repeat", "1", "--label", label, "--out", str(out), "--max-error-rate", "0",
               env={**os.environ, "COLUMNS": "200"}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (d for d in out.iterdir() if d.name.endswith(label))
    return run_dir, done.stdout


def _startup() -> float:
    """The agent's interpreter start-up on this machine now: part of its own time."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "import json, urllib.request"], check=True)
    return time.monotonic() - began


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("split")
    startup = _startup()
    base, console = _run(tmp, 300, "short")
    slow, _ = _run(tmp, 900, "long")
    return {"base": base, "slow": slow, "console": console, "startup": startup, "tmp": tmp}


def test_agent_time_is_its_sleep_and_model_time_the_mocks(runs: dict[str, Any]) -> None:
    summary = json.loads((runs["base"] / "summary.json").read_text())
    split = summary["pooled"]["overall"]["time_split"]
    agent, model = split["agent"], split["model"]
    # Model time: two calls of ~290 ms each on the mock's fixed timings (a loaded machine
    # only adds to it, within the relay's cost).
    assert 2 * CALL * 0.95 <= model["p50"] <= 2 * CALL * 1.5, split
    assert split["model_sum"]["p50"] == pytest.approx(model["p50"], rel=1e-6)  # sequential
    # Agent time: the sleep plus the interpreter's start-up (measured above as reference),
    # never the model's.
    assert 0.300 <= agent["p50"] <= 0.300 + 3 * runs["startup"] + 0.3, (split, runs["startup"])
    assert split["tool"]["p50"] == 0.0
    latency = summary["pooled"]["overall"]["latency"]["p50"]
    parts = agent["p50"] + model["p50"] + split["client"]["p50"]
    assert parts == pytest.approx(latency, rel=0.1)  # the parts make up the task
    console = runs["console"]
    assert "Where the time went" in console and "agent" in console and "model" in console


def test_success_figures_in_summary_and_console(runs: dict[str, Any]) -> None:
    summary = json.loads((runs["base"] / "summary.json").read_text())
    success = summary["pooled"]["overall"]["success"]
    tasks = summary["pooled"]["overall"]["tasks"]
    assert success["tasks"] == tasks and success["rate"] == 1.0
    assert "success" in runs["console"]


def test_compare_names_the_agents_own_time_as_what_moved(runs: dict[str, Any]) -> None:
    done = invoke("compare", str(runs["base"]), str(runs["slow"]), "--root", str(runs["tmp"]))
    said = done.stdout + done.stderr
    assert "the agent's own time" in said, said
    assert "model time" not in said.split("the agent's own time")[0].splitlines()[-1]


def test_the_report_has_the_split_and_success_per_case(runs: dict[str, Any]) -> None:
    out = runs["tmp"] / "report"
    done = invoke("report", str(runs["base"]), str(runs["slow"]), "--root", str(runs["tmp"]),
                  "--baseline", str(runs["base"]), "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (out / "report.md").read_text()
    section = text.split("## Where the time went, and success", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| answer-")]
    assert len(rows) == 2 * 4 and all("100.0%" in row for row in rows)  # 4 cases × 2 runs
    assert (out / "time_split.png").stat().st_size > 0
    assert "success rate" in text  # the compare inside the report has the gated row
