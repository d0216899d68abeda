"""Issue 42 item 3: `--scenario mlperf-server` stamps a run VALID or INVALID by MLPerf's
Server rules (Poisson arrivals, 600 s, 100 queries, the preset at P99 with early stopping),
naming each failed rule; a comparison of runs stamped differently says so."""

from __future__ import annotations

from perfbench.load import Rate
from perfbench.report import slo as words
from perfbench.sample import Sample, Step
from perfbench.stats import goodput
from perfbench.stats.comparable import stamp_notes
from perfbench.stats.scenario import SCENARIOS, stamp
from perfbench.stats.summary import summarize

SERVER = SCENARIOS["mlperf-server"]
PRESET = "mlperf:llama2-70b:server"  # TTFT 2 s, TPOT 200 ms at P99


def _task(i: int, ttft: float, every: float) -> Sample:
    duration = ttft + 0.02 * 10
    step = Step("model", "m", 0.0, duration, ttft=ttft, tokens_out=11, status="ok",
                wait=0.0)  # type: ignore[arg-type]  # fmt: skip
    start = i * every
    return Sample("measured", 0, f"c{i % 5}", i, "en", start, start + duration, status="ok",
                  steps=[step], model_calls=1)  # type: ignore[arg-type]  # fmt: skip


def _stamp(samples: list[Sample], load: object) -> dict:  # type: ignore[type-arg]
    slo = goodput.parse(PRESET)
    summary = summarize(samples, {}, slo)
    return stamp(SERVER, summary["runs"], summary["pooled"]["overall"], load, slo)


def test_a_short_run_is_invalid_and_each_failed_rule_is_named() -> None:
    found = _stamp([_task(i, 0.3, 0.1) for i in range(10)], Rate(10, "poisson"))
    assert not found["valid"]
    failed = {r["rule"]: r["detail"] for r in found["rules"] if not r["ok"]}
    assert failed["min_query_count"] == "10 queries in the smallest run; the rule asks 100"
    assert failed["min_duration"].startswith("the shortest run lasted 1.4 s; the rule asks 600 s")
    assert failed["early_stopping: ttft"] == "10 values; an estimate of ttft P99 needs 662"
    assert "arrivals" not in failed and "latency: ttft" not in failed  # those rules hold
    said = words.stamp_lines(found)
    assert said[0] == "scenario mlperf-server: INVALID"
    assert "  min_query_count: 10 queries in the smallest run; the rule asks 100" in said


def test_a_long_poisson_run_meeting_the_preset_is_valid() -> None:
    found = _stamp([_task(i, 0.3, 0.9) for i in range(700)], Rate(1.1, "poisson"))
    assert found["valid"], [r for r in found["rules"] if not r["ok"]]
    assert words.stamp_lines(found) == ["scenario mlperf-server: VALID"]
    closed = _stamp([_task(i, 0.3, 0.9) for i in range(700)], None)  # a closed loop
    assert [r["rule"] for r in closed["rules"] if not r["ok"]] == ["arrivals"]
    slow = _stamp([_task(i, 2.5 if i % 50 == 0 else 0.3, 0.9) for i in range(700)],
                  Rate(1.1, "poisson"))  # fmt: skip
    assert {r["rule"] for r in slow["rules"] if not r["ok"]} == {
        "latency: ttft", "early_stopping: ttft"}  # fmt: skip


def test_a_comparison_of_a_valid_and_an_invalid_run_says_so() -> None:
    valid = {"scenario": _stamp([_task(i, 0.3, 0.9) for i in range(700)], Rate(1.1, "poisson"))}
    invalid = {"scenario": _stamp([_task(i, 0.3, 0.1) for i in range(10)], Rate(10, "poisson"))}
    (note,) = stamp_notes(valid, invalid)
    assert note.startswith("the baseline is mlperf-server VALID and the candidate "
                           "mlperf-server INVALID")  # fmt: skip
    assert "the candidate's: min_duration, min_query_count, early_stopping: ttft" in note
    assert stamp_notes(valid, valid) == [] and stamp_notes({}, {}) == []
    assert "not stamped" in stamp_notes({}, invalid)[0]


def test_a_sweep_with_a_preset_finds_the_largest_level_meeting_it_at_p99() -> None:
    from perfbench.report.sweep_md import _slo_line
    from perfbench.stats.knee import level_of, slo_max

    slo = goodput.parse(PRESET)

    def level(rate: float, slow_every: int) -> object:
        samples = [_task(i, 2.5 if i % slow_every == 0 else 0.3, 0.1) for i in range(200)]
        return level_of(rate, summarize(samples, {}, slo))

    levels = [level(1, 1000), level(2, 1000), level(4, 20)]  # at 4/s, 5% of TTFTs over 2 s
    assert [v.preset_met for v in levels] == [True, True, False]  # type: ignore[attr-defined]
    assert slo_max(levels, PRESET, 0.9) == 2  # type: ignore[arg-type]
    line = _slo_line((PRESET, 0.9), 2)
    assert line == f"- Largest level meeting {PRESET} (each objective at its P99): 2."
