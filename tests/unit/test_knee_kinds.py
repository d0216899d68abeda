"""The knee is named for what ended the growth (a rate-limit knee when 429s did), the advice
for a sweep whose lowest level already failed is something the user can do, and a poor USL
fit's peak is withheld."""

from __future__ import annotations

from typing import Any

import pytest

from perfbench.report.format import THIN, THIN_NOTE
from perfbench.report.sweep_md import knee_label, markdown
from perfbench.stats.knee import USL_MIN_R2, Level, StopRule, analyse, stop


def lv(n: float, x: float, *, p95: float = 0.1, err: float = 0.0, t429: float = 0.0) -> Level:
    return Level(n, x, p95 / 2, p95, p95, p95 / 2, err, t429, tasks=8 * n)


RULE = StopRule()


@pytest.mark.parametrize(
    ("levels", "kind"),
    [
        ([lv(1, 10), lv(2, 19, t429=0.5)], "rate-limit"),
        ([lv(1, 10), lv(2, 19, t429=0.5, err=0.2)], "rate-limit"),  # refusals that failed
        ([lv(1, 10), lv(2, 19, err=0.02)], "errors"),
        ([lv(1, 10), lv(2, 19, p95=0.4)], "latency"),
        ([lv(1, 10), lv(2, 10.5)], "throughput"),
    ],
)
def test_each_stop_has_its_kind(levels: list[Level], kind: str) -> None:
    found = stop(levels, RULE)
    assert found is not None and found.kind == kind


def test_a_429_stop_gives_answers_per_task_not_a_share() -> None:
    """throttle_rate counts 429 answers per task (retried ones too): 0.94 is not "93.8%"."""
    found = stop([lv(1, 10), lv(2, 19, t429=0.94)], RULE)
    assert found is not None and "0.94 per task" in found.reason and "%" not in found.reason


def _sweep(levels: list[Level], *, rates: bool = False, **extra: Any) -> tuple[dict[str, Any], str]:
    reasons, kinds = {}, {}
    for n in range(len(levels)):
        found = stop(levels[: n + 1], RULE)
        reasons[levels[n].level] = found and found.reason
        kinds[levels[n].level] = found and found.kind
    findings = analyse(levels, reasons, rates=rates, slo=None, kinds=kinds)
    findings.update(extra)
    return findings, markdown(levels, findings, rates=rates, slo=None)


def test_a_knee_ended_by_429s_is_a_rate_limit_knee() -> None:
    levels = [lv(1.0, 10), lv(2.0, 19), lv(4.0, 37), lv(8.0, 70, t429=0.9)]  # as sweeps keep them
    findings, text = _sweep(levels)
    assert (findings["knee"], findings["knee_kind"]) == (4, "rate-limit")
    assert findings["stop_kinds"] == {"8.0": "rate-limit"}
    assert "- Rate-limit knee at 4 (concurrency): 429s ended the growth" in text
    assert "the provider's rate limit, not the target's capacity" in text
    assert "  - 8: 429 answers at 0.90 per task" in text  # the level as the table writes it
    assert knee_label(findings) == "rate-limit knee 4"  # the chart's label


def test_a_knee_ended_by_latency_is_named_so() -> None:
    findings, text = _sweep([lv(1, 10), lv(2, 19), lv(4, 37, p95=0.5)])
    assert findings["knee_kind"] == "latency"
    assert "- Latency knee at 2 (concurrency): P95 grew past its bound" in text
    assert "rate limit" not in text and knee_label(findings) == "latency knee 2"
    assert knee_label({"knee": 2.0}) is None  # no kind (older findings): the chart's default


def test_429s_at_concurrency_1_do_not_advise_lower_levels() -> None:
    """There is no concurrency below 1: the advice is a rate sweep, with the 429 share."""
    findings, text = _sweep([lv(1.0, 0.79, t429=2.5)])
    assert findings["knee"] is None and findings["knee_kind"] is None
    assert findings["stop_kinds"] == {"1.0": "rate-limit"}
    assert "lower levels" not in text
    assert "The rate limit is below the lowest level" in text
    assert "2.50 429 answers per task" in text and "0.79 tasks/s" in text
    assert "`--rates 0.2,0.5,1`" in text  # spans below and past what concurrency 1 completed


def test_errors_at_concurrency_1_say_to_fix_them_not_to_go_lower() -> None:
    _, text = _sweep([lv(1, 5, err=0.5)])
    assert "lower levels" not in text and "failed 50.0% of its tasks" in text


@pytest.mark.parametrize(("lowest", "rates"), [(4.0, False), (1.0, True)])
def test_lower_levels_are_advised_when_there_are_lower_levels(lowest: float, rates: bool) -> None:
    _, text = _sweep([lv(lowest, 5, t429=0.5)], rates=rates)
    assert "broke a stop condition; try lower levels" in text


def _fit(r2: float) -> dict[str, Any]:
    return {"lam": 10.0, "sigma": 0.05, "kappa": 0.002, "n_star": 21.8, "r2": r2}


def test_a_poor_usl_fit_is_shown_with_a_caveat_and_no_peak() -> None:
    _, text = _sweep([lv(1, 10), lv(2, 19)], usl=_fit(0.71))
    assert "USL fit is poor (R² 0.71 < 0.9): its predicted peak is not reliable" in text
    assert "N*" not in text


def test_a_good_usl_fit_gives_its_peak() -> None:
    _, text = _sweep([lv(1, 10), lv(2, 19)], usl=_fit(USL_MIN_R2))
    assert "- USL: σ=0.0500, κ=0.00200, R²=0.900, N*=21.8." in text and "poor" not in text


def test_findings_say_whether_the_usl_fit_is_reliable() -> None:
    sigma, kappa = 0.05, 0.002
    good = [
        lv(n, 10 * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))) for n in (1, 2, 4, 8, 16, 32)
    ]
    assert _sweep(good)[0]["usl_reliable"] is True
    noisy = [lv(n, x) for n, x in zip((1, 2, 4, 8, 16, 32), (10, 40, 12, 45, 11, 44), strict=True)]
    findings, _ = _sweep(noisy)
    assert findings["usl"] is None or findings["usl_reliable"] is (findings["usl"]["r2"] >= 0.9)
    assert _sweep([lv(1, 10)])[0]["usl_reliable"] is None  # too few levels to fit


def test_a_rate_limit_knee_gives_its_throughput_not_a_plateau_when_a_level_above_did_more() -> None:
    """The newcomer's sweep: knee at 7 with 9.62 tasks/s read "plateau 9.62" while 8 did
    12.17 (its 429s retried and succeeded): the chart showed no plateau."""
    levels = [lv(1, 2.2), lv(2, 4.4), lv(4, 8.1), lv(6, 9.3), lv(7, 9.62), lv(8, 12.17, t429=0.56)]
    findings, text = _sweep(levels)
    assert (findings["knee"], findings["knee_kind"]) == (7, "rate-limit")
    assert findings["knee_throughput"] == 9.62 and findings["plateau_throughput"] is None
    assert findings["beyond_knee"] == {"level": 8, "throughput": 12.17, "throttle_rate": 0.56}
    assert "plateau" not in text
    assert "9.62 tasks/s at the knee; 8 completed more (12.17 tasks/s, its 429s retried)" in text


def test_a_plateau_is_named_where_throughput_stopped_growing() -> None:
    findings, text = _sweep([lv(1, 10), lv(2, 19), lv(4, 20)])
    assert (findings["knee"], findings["knee_kind"]) == (2, "throughput")
    assert findings["plateau_throughput"] == 19 and findings["beyond_knee"] is None  # +5 %
    assert "- Throughput knee at 2 (concurrency): throughput stopped growing; plateau 19.00" in text


def test_a_level_whose_tasks_failed_is_not_said_to_have_done_more() -> None:
    """Its throughput counts its few successes: 66 tasks/s with 94 % of its tasks refused
    (429s not retried) is no growth past the knee."""
    levels = [lv(1, 34), lv(2, 64.5), lv(4, 80, err=0.938, t429=0.94)]
    findings, text = _sweep(levels)
    assert findings["beyond_knee"] is None and "completed more" not in text


def test_a_levels_percentiles_are_marked_when_its_runs_were_too_thin() -> None:
    """`8 | 12.09 | 285.8 | 1,035.9 | 1,035.9`: 16 tasks a level, so P95 = P99 = the slowest."""

    def cells(tasks: float, err: float = 0.0) -> list[str]:
        level = Level(8, 12.0, 0.28, 1.0, 1.04, 0.3, err, 0.0, tasks=tasks)
        row = next(line for line in _sweep([level])[1].splitlines() if line.startswith("| 8 "))
        return [c.strip() for c in row.strip("|").split("|")][2:5]

    assert cells(16) == ["280.0", f"1,000.0{THIN}", f"1,040.0{THIN}"]
    assert THIN_NOTE in _sweep([Level(8, 12.0, 0.28, 1.0, 1.04, 0.3, 0.0, 0.0, tasks=16)])[1]
    assert cells(40) == ["280.0", "1,000.0", f"1,040.0{THIN}"]
    assert cells(40, err=0.6) == ["280.0", f"1,000.0{THIN}", f"1,040.0{THIN}"]  # 16 succeeded
    assert cells(100) == ["280.0", "1,000.0", "1,040.0"]
    assert THIN_NOTE not in _sweep([Level(8, 12.0, 0.28, 1.0, 1.04, 0.3, 0.0, 0.0, tasks=100)])[1]


def test_an_interrupted_sweep_without_a_knee_says_it_was_cut_short() -> None:
    """Stopped in its first level's warmup, a sweep printed an empty table over "No stop
    condition was reached: no knee in the levels measured", as if it had gone the whole way."""
    none = markdown([], analyse([], {}, rates=False, slo=None), rates=False, slo=None, cut=True)
    assert "- The sweep was interrupted before any level: no knee yet" in none
    assert "No stop condition was reached" not in none
    two = [lv(1.0, 10), lv(2.0, 19)]
    findings, whole = _sweep(two)
    assert "- No stop condition was reached: no knee in the levels measured." in whole
    cut = markdown(two, findings, rates=False, slo=None, cut=True)
    assert "- The sweep was interrupted after 2 levels: no knee yet; its --resume" in cut
    with_knee = [lv(1.0, 10), lv(2.0, 19), lv(4.0, 37, t429=0.9)]
    findings, whole = _sweep(with_knee)  # a knee found before the stop is still the finding
    assert markdown(with_knee, findings, rates=False, slo=None, cut=True) == whole
