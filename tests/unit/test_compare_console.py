"""`compare` on a terminal: the verdict's Markdown drawn as tables, the verdict heading last,
and words (PASS, FAIL, WARN) for the marks that show as empty boxes without an emoji font.
Before, the terminal got ~110 lines of raw Markdown, the verdict on the first."""

from __future__ import annotations

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


def _text(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(compare_console.render(VERDICT))
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
