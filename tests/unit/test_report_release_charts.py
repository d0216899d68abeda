"""The release report's new charts, from summaries as the summarizer writes them: TTFT, ITL,
latency over time, the change per metric (with the interval of the gate's own test) and
tokens/s appear when the runs have data for them, and are left out, chart and Markdown
reference alike, when they do not (a summary written before ITL and the timeline were recorded,
nothing priced, no error). report.html inlines every image report.md references."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import pytest

from perfbench.report import release, release_md
from perfbench.sample import Phase, Sample, Status, Step
from perfbench.stats import interval
from perfbench.stats.compare import Rules, compare
from perfbench.stats.summary import Summary, summarize

CASES = ("a", "b")


def samples(scale: float, *, runs: int = 5, failed: int = 0) -> list[Sample]:
    """Two cases, 4 tasks each a run, streamed (TTFT, ITL, tokens), one warmup pass first;
    ``failed`` tasks of every run fail."""
    out: list[Sample] = []
    t = 0.0
    passes: list[tuple[Phase, int]] = [("warmup", 0)] + [("measured", r) for r in range(runs)]
    for phase, run in passes:
        for i in range(8):
            case = CASES[i % 2]
            latency = scale * (0.2 + 0.01 * i + 0.003 * run) * (2 if phase == "warmup" else 1)
            status: Status = "error" if i < failed else "ok"
            step = Step("model", "m", start=t, duration=latency, tokens_out=40)
            out.append(
                Sample(
                    phase, run, case, i, "en", start=t, end=t + latency, status=status,
                    ttft=0.05 * scale, itl_mean=0.002 * scale * (1 + i / 10), steps=[step],
                    model_calls=1, tokens_out=40, tokens_in=100,
                    cost=0.0 if phase == "measured" else None,
                    error_kind="http_500" if status == "error" else None,
                )
            )  # fmt: skip
            t += latency / 2
    return out


def run_data(tmp: Path, name: str, summary: Summary) -> release.RunData:
    meta: Any = {
        "id": name,
        "label": name,
        "status": "completed",
        "target": "python:agent",
        "started_at": "2026-12-01T00:00:00",
        "suite": {"name": "s", "digest": "0" * 12},
    }
    return release.RunData(tmp / name, meta, summary)


def report(tmp: Path, base: Summary, cand: Summary) -> tuple[Path, str, set[str]]:
    v1, v2 = run_data(tmp, "v1", base), run_data(tmp, "v2", cand)
    out = tmp / "report"
    md = release.build([v1, v2], v1, out)
    return out, md.read_text(), {p.name for p in out.iterdir()}


def old(summary: Summary) -> Summary:
    """The summary as written before ITL and the timeline were recorded."""
    copy: Any = dict(summary)
    copy.pop("timeline")
    copy["histograms"] = {k: v for k, v in summary["histograms"].items() if "/itl" not in k}
    return copy  # type: ignore[no-any-return]


TIMEOUTS = dict.fromkeys(CASES, 60.0)
BASE = summarize(samples(1.0), TIMEOUTS)
SLOWER = summarize(samples(1.3), TIMEOUTS)


def test_every_new_chart_is_drawn_and_referenced_with_a_caption(tmp_path: Path) -> None:
    out, md, files = report(tmp_path, BASE, SLOWER)
    lines = md.splitlines()
    for name in ("changes", "ttft", "itl", "timeline", "tokens", "latency", "throughput"):
        assert {f"{name}.png", f"{name}.svg"} <= files, name
        image = next(i for i, line in enumerate(lines) if line.endswith(f"]({name}.png)"))
        caption = lines[image - 2]  # the sentence on how to read it, just before the image
        assert caption == release_md.CAPTIONS.get(name, caption) and caption.endswith("."), name
    assert lines[lines.index("## Change per metric: v2 against v1") + 2].startswith(
        "Each metric's change of the median (the dot) with its 90% interval"
    )
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings.index("## Change per metric: v2 against v1") < headings.index(
        "## Latency distribution (tasks, all runs pooled)"
    )
    assert "## Latency over time (warmup included)" in headings
    page = (out / "report.html").read_text()
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert len(sources) == md.count("![") and all(s.startswith("data:image/svg") for s in sources)


def test_an_old_summary_gets_no_itl_or_timeline_chart_nor_its_reference(tmp_path: Path) -> None:
    _, md, files = report(tmp_path, old(BASE), old(SLOWER))
    assert not {"itl.png", "timeline.png"} & files
    assert "itl.png" not in md and "timeline.png" not in md
    assert "Inter-token latency" not in md and "Latency over time" not in md
    assert "ttft.png" in files  # what old summaries did store is still drawn


def test_a_run_of_tasks_that_cost_nothing_has_no_cost_chart(tmp_path: Path) -> None:
    _, md, files = report(tmp_path, BASE, SLOWER)  # every measured task priced at $0
    assert "cost.png" not in files and "cost.png" not in md
    assert "No chart: no run has a non-zero price" in md


def test_change_rows_follow_the_comparison_and_draw_rates_only_when_some_run_failed() -> None:
    result = compare(BASE, SLOWER, Rules())
    relative, points = release.change_rows(result, Rules())
    assert not points  # no error, no 429: no panel of zeros
    p50 = next(c for c in relative if c.label == "P50 latency")
    row = next(r for r in result.rows if r.scope == "overall" and r.metric == "p50")
    assert p50.change == row.change and p50.verdict == row.verdict == "regression"
    assert p50.low <= p50.change <= p50.high and p50.bar == row.bar
    failing = summarize(samples(1.0, failed=2), TIMEOUTS)
    _, points = release.change_rows(compare(BASE, failing, Rules()), Rules())
    assert [c.label for c in points] == ["error rate (% of tasks)"]
    assert points[0].change == pytest.approx(25.0) and points[0].bar == pytest.approx(1.0)


def brute_lower_count(n: int, m: int, alpha: float) -> int:
    """The largest C with P(U < C) ≤ alpha, by listing every split of n + m ranks."""
    us = []
    for chosen in itertools.combinations(range(n + m), n):
        rest = [r for r in range(n + m) if r not in chosen]
        us.append(sum(c > r for c in chosen for r in rest))
    total = len(us)
    return max(c for c in range(n * m + 2) if sum(u < c for u in us) / total <= alpha)


@pytest.mark.parametrize(("n", "m"), [(2, 2), (3, 3), (4, 5), (5, 5), (3, 7)])
def test_the_interval_uses_the_exact_null_of_the_gates_test(n: int, m: int) -> None:
    assert interval.lower_count(n, m, 0.05) == brute_lower_count(n, m, 0.05)


def test_shift_interval_takes_the_cth_pairwise_differences() -> None:
    base, cand = [1.0, 2.0, 3.0, 4.0, 5.0], [11.0, 12.0, 13.0, 14.0, 15.0]
    diffs = sorted(c - b for c in cand for b in base)
    assert interval.shift_interval(base, cand, 0.05) == (diffs[4], diffs[-5])  # C = 5 at 5 v 5
    assert interval.shift_interval([1.0, 2.0], [5.0, 7.0], 0.05) == (3.0, 6.0)  # too few: range
    assert all(math.isnan(v) for v in interval.shift_interval([], [1.0], 0.05))
    many = interval.shift_interval(
        [float(i) for i in range(30)], [i + 2.0 for i in range(30)], 0.05
    )
    assert many[0] < 2.0 < many[1]  # the normal approximation beyond 40 values


def test_a_malformed_timeline_is_ignored_not_an_error() -> None:
    assert release.timeline_slots({"timeline": {"bucket_s": 1.0, "buckets": [{"t": 0}]}}) == []
    assert release.timeline_slots({"timeline": "x"}) == []
    slots = release.timeline_slots(BASE)
    assert sum(s.tasks for s in slots) == 6 * 8 and any(s.warmup for s in slots)
