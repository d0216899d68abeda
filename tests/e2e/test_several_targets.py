"""`run -t A -t B` (issue 23 item 2): it ran only the last target. Now one run per target,
the same cases and plan, then a report comparing them, the first as the baseline. In this
process: run, report and its charts took over 120 s in a child process at load average 14."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import invoke

CASE = "cases:\n  - {id: c, language: en, input: hi, timeout_s: 5}\n"


def test_each_target_is_run_and_one_report_compares_them(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(CASE)
    out = tmp_path / "runs"
    done = invoke("run", str(tmp_path / "s.yaml"), "-t", "mock", "-t", "mock:zero", "--runs", "2",
               "--warmup", "0", "--out", str(out), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = sorted(d for d in out.iterdir() if (d / "meta.json").exists())
    targets = [json.loads((d / "meta.json").read_text())["target"] for d in runs]
    assert targets == ["mock:default", "mock:zero"]
    digests = {json.loads((d / "meta.json").read_text())["suite"]["digest"] for d in runs}
    assert len(digests) == 1  # the same cases
    assert "mock:zero: P50" in done.stdout and "0️⃣" not in done.stdout
    (report,) = out.glob("targets-*/report.md")
    text = report.read_text()
    assert runs[0].name in text and runs[1].name in text


def test_a_target_given_twice_or_to_a_sweep_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(CASE)
    twice = invoke("run", str(tmp_path / "s.yaml"), "-t", "mock", "-t", "mock", "--out",
                str(tmp_path / "runs"))  # fmt: skip
    assert twice.returncode == 2 and "the same target twice" in twice.stderr
    sweep = invoke("sweep", str(tmp_path / "s.yaml"), "-t", "mock", "-t", "mock:zero", "-c", "1,2",
                "--out", str(tmp_path / "runs"))  # fmt: skip
    assert sweep.returncode == 2 and "run takes several" in sweep.stderr


def test_a_bad_later_target_is_refused_before_the_first_runs(tmp_path: Path) -> None:
    # It was found only after the first target's whole run.
    (tmp_path / "s.yaml").write_text(CASE)
    out = tmp_path / "runs"
    done = invoke("run", str(tmp_path / "s.yaml"), "-t", "mock", "-t", "mock:no-such-profile",
               "--runs", "1", "--warmup", "0", "--out", str(out), "-q")  # fmt: skip
    assert done.returncode != 0 and "no mock profile 'no-such-profile'" in done.stderr
    assert not out.exists() or not any(out.iterdir())
