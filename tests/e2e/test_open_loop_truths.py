"""What an open-loop run prints is true of it: the phase header counts the arrivals the pass
starts (it said "run 1: 16 tasks" for a 15 s run that started ~75), the headline sets the
offered rate beside the achieved one, and a trace run is never told to lower --rate."""

from __future__ import annotations

from pathlib import Path

from perfbench.stats.advice import advise
from tests.helpers import CASES, invoke


def test_the_header_counts_arrivals_and_the_headline_says_offered_and_achieved(
    tmp_path: Path,
) -> None:
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--rate", "20",
                  "--duration", "1.5", "--runs", "1", "--warmup", "0",
                  "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "run 1: 30 tasks" in done.stderr  # 20/s for 1.5 s; one case in the suite
    said = " ".join(done.stdout.split())
    assert "open loop: offered 20.00 tasks/s, achieved " in said
    achieved = float(said.split("achieved ")[1].split(" ")[0])
    assert f"({achieved / 20:.0%})" in said  # the share printed is of the figures printed
    # the headline, last on the screen, where a k6 or GuideLLM user looks first
    headline = " ".join(done.stdout.splitlines()[-4:])
    assert f" {achieved:.2f} tasks/s of 20.00 offered ({achieved / 20:.0%})" in headline, headline


def _late(load: dict[str, object]) -> list[str]:
    runs = [{"overall": {"tasks": 5, "ok": 5, "expect_mismatch": 0, "late": 3, "dropped": 2,
                         "error": 0, "timeout": 0, "rate_limited": 0}}]  # fmt: skip
    summary = {"runs": runs, "pooled": {"overall": {}, "cases": {}}, "across_runs": {"overall": {}}}
    return [n for n in advise(summary, {"load": load}) if "open-loop" in n]


def test_a_trace_run_is_not_told_to_lower_a_rate_it_has_not() -> None:
    traced = _late({"shape": "rate", "per_second": 2.0, "trace": [0.0, 0.5, 1.0]})
    assert len(traced) == 2 and not any("--rate" in n for n in traced), traced
    rated = _late({"shape": "rate", "per_second": 2.0, "trace": None})
    assert any("Lower --rate" in n for n in rated)
