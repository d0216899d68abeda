"""Issue 36's done-when for `perfbench ab`'s defaults, on the demo mock (`-t mock`, the issue's
`cases/answer.yaml`): an A/A at the default rounds and repeat passes with every gated metric
able to fail (no `underpowered`); at 2 rounds the verdict is `underpowered` (exit 6 with
--strict). Slow: 9 rounds of two sides, one child process a run (about 2 minutes idle, 7 at
load average 15). On a machine busier than 4 runnable processes a core the A/A's noise can
exceed what the defaults are designed for: it skips then, saying so."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import perfbench as perfbench_package
from tests.e2e.test_ab import ab, new_repo

DEMO = Path(perfbench_package.__file__).parents[1] / "cases" / "answer.yaml"
# Load average per core above which an A/A's noise may exceed the defaults' design (a 60 ms
# TTFT on a machine this busy moved 6% from run to run at 32 tasks a run): such a test skips,
# saying why, rather than fail on the machine's account.
OVERLOADED = 4
pytestmark = pytest.mark.slow


def demo_repo(tmp: Path) -> tuple[Path, str]:
    repo, first = new_repo(tmp / "repo")
    shutil.copy(DEMO, repo / "cases" / "answer.yaml")
    return repo, first


def verdict(repo: Path, tmp: Path, name: str, *args: str) -> tuple[int, dict[str, Any], str]:
    done = ab(
        repo, "--baseline", "HEAD", "-t", "mock", "--cases", "cases/answer.yaml", "--json",
        "--out", str(tmp / name), *args, timeout=1200,
    )  # fmt: skip
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def test_an_a_a_at_the_defaults_passes_and_could_have_failed(tmp_path: Path) -> None:
    """Every run has the same seed (common random numbers), so the rounds differ by the
    machine's noise alone, which the default 32 tasks a run (--repeat 8 of 4 cases) average
    to within what 9 rounds can tell from each metric's threshold; a P99 of 32 tasks is each
    run's slowest task, which the default gate leaves out (shown, not gated). A burst of load
    can still make one A/A noisier than that (its verdict then says underpowered, honestly):
    the test tries once more."""
    repo, _ = demo_repo(tmp_path)
    code, doc, stderr = verdict(repo, tmp_path, "first")
    if doc["outcome"] != "pass":  # a chance failure under load gets one more try, said here
        print(f"first A/A: {doc['outcome']} (exit {code}); trying once more")
        code, doc, stderr = verdict(repo, tmp_path, "again")
    gated = [r for r in doc["comparison"]["rows"] if r["gated"] and r["scope"] == "overall"]
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if doc["outcome"] == "underpowered" and load > OVERLOADED * cores:
        noisy = ", ".join(
            f"{r['metric']} {100 * r['noise']:.1f}%" for r in gated if r["underpowered"]
        )
        pytest.skip(
            f"twice underpowered at load average {load:.1f} on {cores} cores, beyond what the "
            f"defaults are designed for (noise in the pairs {noisy}; 9 pairs tell ~2.5% from 10%)"
        )
    assert (code, doc["outcome"]) == (0, "pass"), stderr
    assert {r["metric"] for r in gated} >= {"p50", "p95", "ttft_p50", "mean", "throughput"}
    assert not [r["metric"] for r in gated if r["underpowered"]]
    assert "p99" not in {r["metric"] for r in gated} and "p99" not in doc["comparison"]["gated"]
    said = [w for w in doc["comparison"]["warnings"] if w.startswith("p99 rests on 32 tasks")]
    assert said and "not gated (shown only)" in said[0]
    assert "--repeat 8: 32 tasks a run (4 a pass)" in stderr
    assert "too few" not in stderr  # no warning about the rounds


def test_two_rounds_are_underpowered_and_fail_under_strict(tmp_path: Path) -> None:
    repo, _ = demo_repo(tmp_path)
    code, doc, stderr = verdict(repo, tmp_path, "two", "--rounds", "2", "--strict")
    assert (code, doc["outcome"]) == (6, "underpowered"), stderr
    assert "2 rounds are too few for a change in one metric to be significant" in stderr
    assert any(r["underpowered"] for r in doc["comparison"]["rows"] if r["gated"])
