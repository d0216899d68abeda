"""Issue 42 items 1-2: SLO presets (MLPerf's and GuideLLM's, each with its source), judged at
their percentile with MLPerf's early-stopping estimate beside it; and issue 37 item 11: an
--slo limit without a unit is refused."""

from __future__ import annotations

import pytest

from perfbench.errors import GateError
from perfbench.report import slo as slo_words
from perfbench.sample import Sample, Step
from perfbench.stats import early_stopping, goodput, presets
from perfbench.stats.histogram import Histogram
from perfbench.stats.summary import summarize


def _task(i: int, ttft: float, tokens: int = 11, itl: float = 0.02) -> Sample:
    duration = ttft + itl * (tokens - 1)
    step = Step("model", "m", 0.0, duration, ttft=ttft, tokens_out=tokens, status="ok",
                wait=0.0)  # type: ignore[arg-type]  # fmt: skip
    return Sample("measured", 0, f"c{i}", 0, "en", float(i), float(i) + duration,
                  status="ok", steps=[step], model_calls=1)  # type: ignore[arg-type]  # fmt: skip


def test_mlperf_presets_carry_the_conf_figures_and_their_source() -> None:
    known = presets.presets()
    rows = {
        "mlperf:llama2-70b:server": (2.0, 0.2),
        "mlperf:llama2-70b:interactive": (0.45, 0.04),
        "mlperf:llama3.1-8b:interactive": (0.5, 0.03),
        "mlperf:llama3.1-405b:server": (6.0, 0.175),
        "mlperf:deepseek-r1:interactive": (1.5, 0.015),
    }
    for name, (ttft, tpot) in rows.items():
        preset = known[name]
        assert dict(preset.limits) == pytest.approx({"ttft": ttft, "tpot": tpot})
        assert preset.percentile == 99.0
        assert "github.com/mlcommons/inference/blob/" in preset.url and preset.cite
    chat = known["guidellm:chat"]
    assert dict(chat.limits) == pytest.approx({"ttft": 0.2, "tpot": 0.05})
    assert "guidellm" in chat.url
    assert all(p.url and p.cite for p in known.values())  # every number has its source


def test_a_preset_name_parses_to_its_objectives_and_a_typo_lists_the_known() -> None:
    slo = goodput.parse("mlperf:llama2-70b:interactive")
    assert slo.limits == (("ttft", 0.45), ("tpot", 0.04)) and slo.percentile == 99.0
    assert slo.text == "mlperf:llama2-70b:interactive"
    with pytest.raises(GateError, match="no such preset; known: mlperf:llama2-70b:server"):
        goodput.parse("mlperf:llama2-70b:fast")


def test_a_limit_without_a_unit_is_refused_with_the_spellings() -> None:
    with pytest.raises(GateError, match=r"give the limit a unit, as in ttft<500ms or ttft<500s"):
        goodput.parse("ttft<500")
    assert goodput.parse("ttft<500ms,tpot<0.05s,e2e<900us").limits[2] == ("e2e", 0.0009)


def test_early_stopping_minimum_counts_and_mlperf_table() -> None:
    # LoadGen's MultiStream min_query_count (662) is the fewest queries its P99 estimate needs.
    assert early_stopping.min_count(99) == 662
    assert (early_stopping.min_count(95), early_stopping.min_count(90)) == (130, 64)
    # ... and, the other way round, the percentile a run of n values can claim.
    claims = [early_stopping.claimable(n) for n in (1, 64, 100, 130, 662)]
    assert claims == [None, 90.0, 93.5, 95.0, 99.0]
    # inference_rules.adoc's table: inferences, then rounded to multiples of 2^13.
    table = {90.0: (23_886, 24_576), 95.0: (50_425, 57_344), 97.0: (85_811, 90_112),
             99.0: (262_742, 270_336)}  # fmt: skip
    for pct, (raw, rounded) in table.items():
        size = early_stopping.sample_size(pct, early_stopping.MARGINS[pct])
        assert (size, early_stopping.rounded(size)) == (raw, rounded)


def test_the_estimate_is_the_largest_value_the_binomial_bound_allows() -> None:
    # 1,000 values 1..1000 ms: raw P99 is the 990th; at 99% confidence the bound allows two
    # values above the true P99, so the estimate is the 2nd largest (999 ms).
    hist = Histogram()
    for v in range(1, 1001):
        hist.add(v / 1000)
    assert hist.percentiles([99])[99] == pytest.approx(0.990)
    es = early_stopping.estimate(hist, 99)
    assert es["largest"] == 2 and es["value"] == pytest.approx(0.999)
    assert early_stopping.allowance(1000, 99) == 2
    small = Histogram()
    for v in range(1, 101):
        small.add(v / 1000)
    none = early_stopping.estimate(small, 99)
    assert none["value"] is None and none["needs"] == 662  # 100 values claim no P99


def test_a_preset_is_missed_on_its_p99_and_the_words_say_which() -> None:
    # TTFT 300 ms for 98 requests, 600 ms for 2: P99 600 ms over the interactive 450 ms.
    samples = [_task(i, 0.6 if i in (3, 70) else 0.3) for i in range(100)]
    good = summarize(samples, {}, goodput.parse("mlperf:llama2-70b:interactive"))["pooled"][
        "overall"
    ]["goodput"]
    ttft, tpot = good["objectives"]
    assert ttft["metric"] == "ttft" and ttft["value"] == pytest.approx(0.6) and not ttft["met"]
    assert tpot["value"] == pytest.approx(0.02) and tpot["met"]  # 20 ms under 40 ms
    assert ttft["early_stopping"]["value"] is None and ttft["early_stopping"]["needs"] == 662
    lines = slo_words.verdict(good)
    assert lines[0] == "SLO mlperf:llama2-70b:interactive: MISSED (TTFT P99 600.0 ms over 450.0 ms)"
    assert ("early-stopping P99 (99% confidence): none: needs 662 requests, has 100 (they back "
            "only P93.5 ≤ 600.0 ms, the largest)") in lines[1]  # fmt: skip


def test_a_large_run_shows_the_early_stopping_p99_above_the_raw_one() -> None:
    # 1,000 requests, TTFT 100..1099 ms evenly: raw P99 1,089 ms, estimate 1,098 ms.
    samples = [_task(i, 0.1 + i / 1000) for i in range(1000)]
    good = summarize(samples, {}, goodput.parse("mlperf:llama2-70b:server"))["pooled"]["overall"][
        "goodput"
    ]
    ttft = good["objectives"][0]
    assert ttft["value"] == pytest.approx(1.089) and ttft["met"]
    assert ttft["early_stopping"]["value"] == pytest.approx(1.098)
    assert ttft["early_stopping"]["value"] > ttft["value"]
    assert slo_words.verdict(good)[0] == "SLO mlperf:llama2-70b:server: met"
    assert "early-stopping P99 (99% confidence): 1.10 s" in slo_words.verdict(good)[1]


def test_every_scope_keeps_early_stopping_tails_and_the_console_line_shows_them() -> None:
    samples = [_task(i, 0.1 + i / 1000) for i in range(1000)]
    overall = summarize(samples, {})["pooled"]["overall"]
    tails = overall["early_stopping"]["request_ttft"]
    assert tails["p99"] == pytest.approx(1.098) and tails["p99"] > overall["request_ttft"]["p99"]
    assert tails["p90"] > overall["request_ttft"]["p90"]
    (line,) = slo_words.tail_claims(overall)
    assert line.startswith("early-stopping P99 (99% confidence, runs pooled): latency ")
    assert "TTFT 1.10 s (raw 1.09 s)" in line
    few = summarize(samples[:100], {})["pooled"]["overall"]
    assert few["early_stopping"]["latency"]["p99"] is None
    assert few["early_stopping"]["latency"]["p90"] is not None  # 64 values back a P90
    # 100 tasks back no P99, but their largest value bounds P93.5 at 99% confidence (it is
    # above the raw P99, and labelled with the percentile it does back).
    assert few["early_stopping"]["latency"]["claimable"] == 93.5
    assert few["latency"]["max"] > few["latency"]["p99"]
    largest = f"{few['latency']['max'] * 1000:.1f} ms"
    raw = f"{few['latency']['p99'] * 1000:.1f} ms"
    said = slo_words.tail_claims(few)[0]
    assert (f"latency none: needs 662 tasks, has 100 (raw {raw}; they back only P93.5 ≤ "
            f"{largest}, the largest)") in said  # fmt: skip
