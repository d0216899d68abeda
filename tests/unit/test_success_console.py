"""Success on the short screen (issue 39): a model endpoint whose tasks finished but missed their
case's expect printed `ok/tasks 12/12`, `errors 0.0%` and the cost per task, with no success
rate and no cost per success anywhere; its one warning spoke of tool calls although the case
expected an output text."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from perfbench.cli.output import print_result
from perfbench.sample import Sample, Step
from perfbench.stats.summary import summarize

CASES = [{"id": c, "language": "en", "tags": [], "tools": 0, "timeout_s": 60.0}
         for c in ("good", "bad")]  # fmt: skip
META = {"target": "openai/gpt-4o-mini", "suite": {"name": "s", "cases": CASES, "digest": "0" * 64},
        "status": "completed", "prices": {"priced_as": "openai/gpt-4o-mini"}}  # fmt: skip


def _samples(missed: bool) -> list[Sample]:
    samples = []
    for run in range(3):
        for i, case in enumerate(("good", "bad")):
            s = Sample("measured", run, case, i, "en", 0.0, 0.5, cost=0.001,
                       steps=[Step("model", "chat", start=0.1, duration=0.4)], model_calls=1,
                       expect_ok=not (missed and case == "bad"))  # fmt: skip
            samples.append(s)
    return samples


def _screen(samples: list[Sample]) -> str:
    summary: Any = summarize(samples, {"good": 60, "bad": 60})
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    print_result(summary, META, console)
    return console.export_text()


def test_a_model_endpoints_missed_expects_show_as_success_and_its_cost() -> None:
    screen = _screen(_samples(missed=True))
    rates, _, cost = screen.splitlines()[-3:]  # the headline, last
    assert "errors 0.0% · success 50.0%" in rates
    # 6 tasks at $0.001 over 3 successes: what one success cost.
    assert cost == "cost $0.001000/task, $0.002000/successful task, $0.006000 in all"
    assert "Where the time went" in screen  # per-case success on the short screen
    (bad,) = [line for line in screen.splitlines() if line.startswith(("│ bad", "| bad"))]
    assert "0.0%" in bad and "unpriced" not in bad  # no success, not "unpriced"
    assert "3 of 6 measured task(s) finished but not as their case's expect asks" in screen
    assert "did not make the tool calls" not in screen


def test_when_every_task_succeeded_the_screen_is_as_before() -> None:
    screen = _screen(_samples(missed=False))
    assert "success" not in screen.splitlines()[-3] and "/successful task" not in screen
    assert "Where the time went" not in screen  # a model endpoint: --details has it


def test_the_reports_section_has_calls_and_tokens_beside_the_split() -> None:
    """Issue 39 asks for model calls and tokens per task beside the split: the console's table
    had them, the report's did not."""
    from perfbench.report.time_split import section

    samples = _samples(missed=True)
    for s in samples:
        s.tokens_out = 12
    summary: Any = summarize(samples, {"good": 60, "bad": 60})
    lines = "\n".join(section([("v1", summary)], None)).splitlines()
    header = next(line for line in lines if line.startswith("| case"))
    assert header.split("|")[-3:-1] == [" calls ", " tok out "]
    rows = {line.split("|")[1].strip(): line.split("|") for line in lines if "| v1 |" in line}
    assert [c.strip() for c in rows["good"][-3:-1]] == ["1.0", "12"]
    assert rows["bad"][3].strip() == "0.0%" and rows["bad"][4].strip() == "–"  # none succeeded


def test_a_sweep_level_gives_its_success_rate_under_load() -> None:
    """Success under load (issue 39, AIPerf #1038): a sweep's table gave errors and 429s per
    level, not whether the tasks that completed still did what their case expects."""
    from perfbench.report.sweep_md import markdown
    from perfbench.stats.knee import level_of

    level = level_of(8, summarize(_samples(missed=True), {"good": 60, "bad": 60}))
    assert level.success_rate == 0.5 and level.error_rate == 0.0
    findings = {"knee": None, "stopped_by": {}, "kneedle": None, "usl": None,
                "client_bound_levels": []}  # fmt: skip
    lines = markdown([level], findings, rates=False, slo=None).splitlines()
    header = next(line for line in lines if line.startswith("| concurrency"))
    row = next(line for line in lines if line.startswith("| 8 |"))
    cells = dict(zip(header.split("|"), row.split("|"), strict=True))
    assert cells[" success "].strip() == "50.0%" and cells[" errors "].strip() == "0.0%"
