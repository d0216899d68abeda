"""A Ctrl-C while tasks wait out a 429's Retry-After cancels them; `--resume` runs them again.
The 429s they were answered are the server's and must survive both (a sweep level resumed so
showed 0.00 429s a task against 0.25 uninterrupted, and was called client-bound)."""

from __future__ import annotations

from pathlib import Path

import orjson

from perfbench import store
from perfbench.engine.resume import Resume
from perfbench.sample import Sample
from perfbench.spec import Plan
from perfbench.stats.summary import summarize
from tests.helpers import CASES


def _sample(case: str, status: str = "ok", throttled: int = 0) -> Sample:
    end = 0.5 if status == "cancelled" else 1.0
    return Sample("measured", 0, case, 0, "en", 0.0, end, status=status, throttled=throttled)  # type: ignore[arg-type]


def _write(run_dir: Path, samples: list[Sample]) -> None:
    lines = b"".join(orjson.dumps(s.to_json()) + b"\n" for s in samples)
    (run_dir / store.SAMPLES).write_bytes(lines)


def test_a_task_cancelled_in_backoff_keeps_its_429s_and_runs_again(tmp_path: Path) -> None:
    from perfbench.suite import load_suite

    suite = load_suite([CASES / "answer.yaml"])
    case = suite.cases[0].id
    _write(tmp_path, [_sample("other", throttled=1), _sample(case, "cancelled", throttled=2)])
    kept: list[Sample] = []
    resume = Resume.read(tmp_path, suite, Plan(runs=1, warmup=0), kept.append)
    assert ("measured", 0, case, 0) not in resume.done  # it runs again
    assert ("measured", 0, "other", 0) in resume.done
    rerun = _sample(case)  # the server's window has passed: no 429 this time
    overall = summarize([*kept, rerun], {case: 5.0, "other": 5.0})["runs"][0]["overall"]
    assert (overall["tasks"], overall["throttled"]) == (2, 3)
    assert overall["throttle_rate"] == 1.5


def test_a_recomputed_summary_counts_the_cancelled_attempt_and_the_rerun(tmp_path: Path) -> None:
    _write(tmp_path, [_sample("a", "cancelled", throttled=2), _sample("a", throttled=1)])
    meta = {"suite": {"cases": [{"id": "a", "timeout_s": 5}]}}
    overall = store.read_summary(tmp_path, meta)["runs"][0]["overall"]
    assert (overall["tasks"], overall["cancelled"], overall["throttled"]) == (1, 1, 3)
