"""A run that did not complete says how it ended and how to continue it, first among the
warnings (the short screen shows the first two)."""

from __future__ import annotations

import pytest

from perfbench.sample import Sample
from perfbench.stats.advice import advise
from perfbench.stats.summary import summarize

MEASURED = summarize(
    [Sample("measured", 0, "c", i, "en", start=0.0, end=0.1) for i in range(5)], {"c": 60.0}
)


@pytest.mark.parametrize(
    ("meta", "says"),
    [
        ({"status": "interrupted"}, "The run was interrupted"),
        ({"status": "failed", "error": "cannot append: No space left on device"}, "No space left"),
        ({"status": "killed"}, "too full to rewrite meta.json"),
    ],
)
def test_an_unfinished_run_says_how_it_ended_first(meta: dict[str, str], says: str) -> None:
    first = advise(MEASURED, meta)[0]
    assert says in first and "cover only the tasks that finished" in first
    if meta["status"] != "interrupted":  # an interrupted run prints its resume line itself
        assert "perfbench run --resume" in first


def test_a_failed_runs_own_resume_hint_is_not_repeated() -> None:
    error = "cannot append: No space left. Fix it, then `perfbench run --resume runs/x`"
    (first, *_) = advise(MEASURED, {"status": "failed", "error": error})
    assert first.count("--resume") == 1 and "runs/x" in first


def test_a_completed_or_refused_run_has_no_such_note() -> None:
    for status in ("completed", "refused"):
        assert not [n for n in advise(MEASURED, {"status": status}) if "cover only" in n]
