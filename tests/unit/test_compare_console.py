"""`compare` on a terminal: the verdict's Markdown drawn as tables, the verdict heading last,
and words (PASS, FAIL, WARN) for the marks that show as empty boxes without an emoji font.
Before, the terminal got ~110 lines of raw Markdown, the verdict on the first."""

from __future__ import annotations

import io

from rich.console import Console

from perfbench.report import compare_console

VERDICT = """## perfbench compare: ❌ regression (p95); exit 4

Baseline `v1`, 5 runs → candidate `v2`, 5 runs.

| Metric | Baseline | Candidate | Change | Verdict |
| --- | ---: | ---: | ---: | --- |
| P95 latency | 901.7 ms | 1.20 s | +33.1% | ❌ regression |
| P50 latency | 301.2 ms | 305.0 ms | +1.3% | pass |
| a-very-long-metric-name-that-cannot-fit-in-its-column-at-80 | 1 | 2 | +1% | ✅ improvement |

<details><summary>P95 of every case</summary>

| Case | Baseline P95 | Candidate P95 |
| --- | ---: | ---: |
| answer-en | 1 | 2 |

</details>

- ⚠️ inconclusive elsewhere
"""


def _text(width: int, verdict: str = VERDICT) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(compare_console.render(verdict))
    return console.export_text()


def test_the_verdict_is_drawn_with_its_heading_last_and_words_for_marks() -> None:
    text = _text(80)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert lines[-1] == "perfbench compare: FAIL: regression (p95); exit 4"
    assert not any(mark in text for mark in ("✅", "❌", "⚠️"))
    assert (
        "FAIL: regression" in text and "PASS: improvement" in text and "WARN: inconclusive" in text
    )
    assert "|" not in text and "---" not in text and "<details>" not in text  # not raw Markdown
    assert "answer-en" not in text and "--markdown FILE" in text  # folded tables: in the file
    assert max(len(line) for line in text.splitlines()) <= 80  # a wide name wraps in its cell


def test_a_pass_reads_pass() -> None:
    assert (
        compare_console.plain_marks("## perfbench compare: ✅ pass") == "## perfbench compare: PASS"
    )


WIDE = """## perfbench compare: ⚠️ underpowered (throughput could not have failed); exit 0

| Metric | Baseline | Candidate | Change | Counts beyond | p | Verdict |
| --- | ---: | ---: | ---: | ---: | ---: | --- |
| P50 latency | 0.10 ms (0.09 ms–0.10 ms) | 0.08 ms (0.08 ms–0.08 ms) | -13.7% | ±20.7% noise | 0.167 (q 0.389) | ⚠️ underpowered |
| throughput | 1,903.89/s (1,476.97/s–2,330.81/s) | 4,830.98/s (1,909.34/s–7,752.62/s) | +153.7% | ±161.3% noise | 0.333 (q 0.389) | ⚠️ underpowered |
| success rate (ok and as expected) | 100.00% | 100.00% | +0.00 pts | – | 1.000 | pass |
"""  # noqa: E501


def test_at_80_columns_no_figure_or_verdict_is_cut_short() -> None:
    # rich narrowed the widest columns first: `1,903.89…` (its unit and range cut off) and
    # `WARN: underpowe…` on an 80-column terminal (two rows and the verdict line say it)
    text = _text(80, WIDE)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    words = text.split()
    for figure in ("1,903.89/s", "(1,476.97/s", "2,330.81/s)", "7,752.62/s)", "underpowered"):
        assert figure in words, text
    assert words.count("underpowered") == 3 and "–" in words  # (0.09 ms – 0.10 ms)
