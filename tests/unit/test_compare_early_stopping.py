"""Issue 42 item 2, in compare: beside the tail percentiles a verdict rests on (P95, P99,
TTFT P95/P99), each side's early-stopping estimate (MLPerf's rule, runs pooled), or how many
tasks it needs and what the side's tasks do back; in the Markdown, on the terminal and in
--json."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict
from typing import Any

import pytest
from rich.console import Console

from perfbench.report import compare_console, compare_md
from perfbench.report import slo as slo_words
from perfbench.sample import Sample, Step
from perfbench.stats import early_stopping
from perfbench.stats.compare import Comparison, Rules, compare
from perfbench.stats.summary import summarize

META = {"id": "r", "status": "completed", "suite": {"name": "s", "digest": "d"}}


def _task(i: int, run: int, latency: float) -> Sample:
    ttft = latency / 2
    step = Step("model", "m", 0.0, latency, ttft=ttft, tokens_out=11, status="ok",
                wait=0.0)  # type: ignore[arg-type]  # fmt: skip
    return Sample("measured", run, f"c{i % 4}", 0, "en", float(i), float(i) + latency,
                  status="ok", steps=[step], model_calls=1, ttft=ttft)  # type: ignore[arg-type]  # fmt: skip


def _summary(tasks: int, runs: int = 1, scale: float = 1.0) -> dict[str, Any]:
    """``tasks`` per run, latencies evenly 0.3 s … 0.3 s + (tasks − 1) ms, times ``scale``."""
    return summarize(
        [_task(i, r, scale * (0.3 + i / 1000)) for r in range(runs) for i in range(tasks)], {}
    )


@pytest.fixture(scope="module")
def result() -> Comparison:
    # Baseline: 100 tasks, too few for a P99 (or a P95); candidate: 3 runs of 400 tasks.
    return compare(_summary(100), _summary(400, runs=3, scale=1.1), Rules())


def test_each_tail_row_gets_both_sides_claims_from_the_pooled_runs(result: Comparison) -> None:
    tails = {t.metric: t for t in result.tails}
    assert set(tails) == {"p95", "p99", "ttft_p95", "ttft_p99"}
    cand = tails["p99"].candidate
    assert cand is not None and cand.n == 1200
    # 1,200 values: at most t = allowance(1200, 99) of them may lie above the true P99, so
    # the t-th largest bounds it. Each latency appears 3 times (one per run).
    t = early_stopping.allowance(1200, 99)
    ordered = sorted(1.1 * (0.3 + i / 1000) for i in range(400) for _ in range(3))
    assert t >= 2 and cand.value == pytest.approx(ordered[-t], rel=1e-3)
    assert cand.raw is not None and cand.value > cand.raw and cand.backs is None


def test_a_side_of_100_tasks_says_what_it_needs_and_what_it_backs(result: Comparison) -> None:
    base = next(t for t in result.tails if t.metric == "p99").baseline
    assert base is not None and base.value is None and (base.n, base.needs) == (100, 662)
    # MLPerf's rule at a lower percentile: P(Binomial(100, 1 − p) ≤ 1) ≤ 1% holds up to
    # P93.5, where the largest value is the bound (LoadGen's t = 1).
    assert base.backs == 93.5 and base.largest == pytest.approx(0.399)
    p95 = next(t for t in result.tails if t.metric == "p95").baseline
    assert p95 is not None and p95.value is None and p95.needs == 130


def _rows(text: str) -> dict[str, str]:
    return {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}


def test_the_markdown_puts_the_claims_beside_the_rows_with_a_note(result: Comparison) -> None:
    text = compare_md.comparison(result, META, META, [], "pass")
    head = "| Early-stopping (99%) | Baseline | Candidate |"
    assert head in text
    below_rows = text.index("| P99 latency |") < text.index(head)
    assert below_rows, "the claims follow the verdict table"
    row = _rows(text[text.index(head) :])["P99 latency"]
    assert "| none: needs 662 tasks, has 100 (raw 398.0 ms; they back only P93.5 ≤ " in row
    assert "399.0 ms, the largest) |" in row
    assert " (raw " in row.rsplit("|", 2)[1]  # the candidate's estimate beside its raw P99
    assert "Early-stopping (MLPerf Inference's rule): with 99% confidence" in text


def test_the_terminal_and_json_carry_them_too(result: Comparison) -> None:
    text = compare_md.comparison(result, META, META, [], "pass")
    console = Console(width=200, record=True, color_system=None)
    console.print(compare_console.render(text))
    drawn = console.export_text()
    assert "Early-stopping (99%)" in drawn
    assert "needs 662 tasks, has 100" in drawn
    doc = json.loads(json.dumps(asdict(result)))
    p99 = next(t for t in doc["tails"] if t["metric"] == "p99")
    assert p99["baseline"]["needs"] == 662 and p99["candidate"]["value"] > 0


def test_summaries_without_estimates_show_no_section() -> None:
    old = [_summary(100), _summary(100)]
    for doc in old:  # written before estimates were kept
        del doc["pooled"]["overall"]["early_stopping"]
    found = compare(old[0], old[1], Rules())
    assert found.tails == []
    assert slo_words.compare_tails(found) == []
    assert "Early-stopping" not in compare_md.comparison(found, META, META, [], "pass")


def test_only_rows_the_table_shows_get_claims(result: Comparison) -> None:
    rules = Rules(metrics=tuple(m for m in Rules().metrics if m.name != "ttft_p99"))
    fewer = compare(_summary(100), _summary(400, runs=3), rules)
    assert "ttft_p99" not in {t.metric for t in fewer.tails}
    hidden = copy.deepcopy(result)
    hidden.rows[:] = [r for r in hidden.rows if r.metric != "p99"]
    text = "\n".join(slo_words.compare_tails(hidden))
    assert "| P95 latency |" in text and "| P99 latency |" not in text


def _loadgen_t(n: int, percentile: float) -> int | None:
    """LoadGen's own procedure (loadgen/results.cc, SingleStream/MultiStream), written out
    independently: h(t) is the fewest passing queries with P(at most t of h + t queries over
    the percentile) < 1%; t is the largest with n ≥ h(t) + t; None below h(1) + 1 queries."""
    q = 1 - percentile / 100

    def odds(total: int, t: int) -> float:
        # each binomial term in logs: C(total, x) overflows a float for thousands of queries
        return sum(
            math.exp(math.log(math.comb(total, x)) + x * math.log(q) + (total - x) * math.log1p(-q))
            for x in range(t + 1)
        )

    def h(t: int) -> int:
        low, high = 1, 100_000
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if odds(mid + t, t) < 0.01 else (mid + 1, high)
        return low

    if n < h(1) + 1:
        return None
    t = 1
    while n >= h(t + 1) + t + 1:
        t += 1
    return t


@pytest.mark.parametrize("n", [63, 64, 100, 129, 130, 661, 662, 1000, 2000])
@pytest.mark.parametrize("percentile", [90.0, 95.0, 99.0, 93.5, 93.6])
def test_the_rule_is_loadgens(n: int, percentile: float) -> None:
    """The figures a 100-task run shows (needs 662; backs P93.5 but not P93.6) are LoadGen's."""
    expected = _loadgen_t(n, percentile)
    found = early_stopping.allowance(n, percentile)
    assert (found if found >= 1 else None) == expected
