"""The charts an LLM team looks for first: TTFT and ITL by percentile, latency over time with the
warmup shaded, the per-metric change with its interval, output tokens/s, and the sweep chart
(knee label clear of the data, 429s per task and errors each in a panel of their own, no panel
of zeros, one level drawn as points). Checked through the stable SVG ids each chart sets, and
byte-identical output for the same input."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from perfbench.report import charts
from perfbench.stats.knee import Level
from tests.unit.test_report_charts import check_files, lines, svg_ids, svg_text

Chart = Callable[[Path], list[Path]]


def element(svg: Path, gid: str) -> ET.Element:
    found = next((e for e in ET.parse(svg).getroot().iter() if e.attrib.get("id") == gid), None)
    assert found is not None, f"no {gid} in {svg.name}"
    return found


def drawn_vertices(svg: Path, gid: str) -> int:
    """Vertices of the line a series drew (0 when it drew only markers): its own paths, not
    the marker shapes kept under <defs>."""
    group = element(svg, gid)
    shapes = {id(p) for d in group.iter() if d.tag.endswith("defs") for p in d.iter()}
    paths = [p for p in group.iter() if p.tag.endswith("path") and id(p) not in shapes]
    return sum(1 + p.attrib["d"].count("L") for p in paths)


def style_of(svg: Path, gid: str) -> str:
    return " ".join(e.attrib.get("style", "") for e in element(svg, gid).iter())


def level(n: float, throughput: float, error: float = 0.0, throttle: float = 0.0) -> Level:
    return Level(n, throughput, 0.1, 0.2 * n**0.5, 0.3, 0.1, error, throttle)


LEVELS = [
    level(1, 10),
    level(2, 19),
    level(4, 35),
    level(8, 40, 0.0, 0.5),
    level(16, 41, 0.02, 1.5),
]


def slots(warm: int, n: int, width: float = 0.5) -> list[charts.TimeSlot]:
    return [
        charts.TimeSlot(i * width, width, i < warm, 4 + i % 3, 0.2 + 0.3 * (i < warm), 0.5)
        for i in range(n)
    ]


CHANGES = [
    charts.Change("P50 latency", 0.28, 0.20, 0.35, 0.15, "regression"),
    charts.Change("throughput", 0.12, 0.08, 0.15, 0.10, "improvement"),
    charts.Change("TTFT P95", 0.30, -0.2, 0.8, 0.9, "inconclusive"),
    charts.Change("tokens in / task", 0.0, 0.0, 0.0, 0.0, "pass"),
]
POINTS = [charts.Change("error rate (% of tasks)", 2.0, 1.0, 3.0, 1.0, "regression")]


def ttft(stem: Path) -> list[Path]:
    series = {"v1": [(0.0, 0.05), (50.0, 0.06), (90.0, 0.1)], "v2": [(0.0, 0.07), (50.0, 0.08)]}
    return charts.latency_distribution(
        series, stem, "Time to first token by percentile", ylabel="TTFT (ms)"
    )


ALL: dict[str, Chart] = {
    "ttft": ttft,
    "timeline": lambda stem: charts.latency_timeline(
        {"v1": slots(4, 30), "v2": slots(0, 12)}, stem
    ),
    "changes": lambda stem: charts.change_forest(CHANGES, POINTS, stem, interval="90% interval"),
    "tokens": lambda stem: charts.tokens_per_second(["v1", "v2"], [(90.0, 85, 99), None], stem),
    "sweep": lambda stem: charts.sweep_chart(LEVELS, 8, stem, "concurrency"),
}


@pytest.mark.parametrize("name", list(ALL))
def test_same_input_gives_identical_bytes(name: str, tmp_path: Path) -> None:
    first, second = ALL[name](tmp_path / "a"), ALL[name](tmp_path / "b")
    check_files(first, tmp_path / "a")
    for one, two in zip(first, second, strict=True):
        assert one.read_bytes() == two.read_bytes()


def test_the_percentile_chart_serves_ttft_with_its_own_axis(tmp_path: Path) -> None:
    _, svg = ALL["ttft"](tmp_path / "ttft")
    text = svg_text(svg)
    assert "Time to first token by percentile" in text and "TTFT (ms)" in text
    assert "latency (ms)" not in text
    assert {"line-r0", "line-r1"} <= set(svg_ids(svg))


def test_latency_timeline_draws_p95_p50_and_rate_per_run_and_shades_only_warmup(
    tmp_path: Path,
) -> None:
    _, svg = ALL["timeline"](tmp_path / "tl")
    ids = set(svg_ids(svg))
    for run in ("r0", "r1"):
        assert {f"p95-{run}", f"p50-{run}", f"done-{run}"} <= ids
    assert "warmup-r0" in ids and "warmup-r1" not in ids  # v2 had no warmup slot
    assert drawn_vertices(svg, "p95-r0") == 30 and drawn_vertices(svg, "done-r1") == 12
    assert "#1f77b4" in style_of(svg, "warmup-r0")  # the run's own colour
    text = svg_text(svg)
    assert "shaded: warmup" in text and "tasks finished/s" in text


def test_a_one_slot_timeline_is_a_point_not_a_line(tmp_path: Path) -> None:
    _, svg = charts.latency_timeline({"v1": slots(0, 1)}, tmp_path / "one")
    assert drawn_vertices(svg, "p95-r0") == 0
    assert "warmup-r0" not in svg_ids(svg)


def test_change_forest_colours_by_verdict_and_draws_the_bar(tmp_path: Path) -> None:
    _, svg = ALL["changes"](tmp_path / "ch")
    ids = set(svg_ids(svg))
    assert {f"change-c{j}" for j in range(4)} <= ids
    assert {f"change-interval-c{j}" for j in range(4)} <= ids
    # No band where nothing may move (an exact comparison's bar is 0).
    assert {i for i in ids if i.startswith("change-band-")} == {
        f"change-band-c{j}" for j in range(3)
    }
    assert {"points-c0", "points-interval-c0", "points-band-c0"} <= ids
    assert charts.VERDICT_COLOURS["regression"] in style_of(svg, "change-c0")
    assert charts.VERDICT_COLOURS["improvement"] in style_of(svg, "change-c1")
    inconclusive = style_of(svg, "change-c2")
    assert charts.VERDICT_COLOURS["inconclusive"] in inconclusive and "#ffffff" in inconclusive
    text = lines(svg_text(svg))
    assert {"+28.0%", "+2.0 pts", "regression", "improvement"} <= set(text)
    assert any("90% interval" in line for line in text)


def test_change_forest_has_no_rate_panel_without_rates(tmp_path: Path) -> None:
    _, svg = charts.change_forest(CHANGES, [], tmp_path / "ch")
    ids = svg_ids(svg)
    assert not [i for i in ids if i.startswith("points-")]
    assert "axes_2" not in ids
    assert "change in points" not in svg_text(svg)


def test_tokens_per_second_draws_one_bar_per_run_with_data(tmp_path: Path) -> None:
    _, svg = ALL["tokens"](tmp_path / "tok")
    ids = set(svg_ids(svg))
    assert "tokens-r0-c0" in ids and "tokens-r1-c0" not in ids
    assert lines(svg_text(svg)).count("n/a") == 1


def test_throughput_without_any_error_or_429_has_no_rate_panel(tmp_path: Path) -> None:
    _, svg = charts.throughput_errors(
        ["v1", "v2"], [(2.0, 1.9, 2.1), (1.5, 1.4, 1.6)], [0.0, 0.0], [0.0, None], tmp_path / "tp"
    )
    ids = svg_ids(svg)
    assert {"throughput-r0-c0", "throughput-r1-c0"} <= set(ids)
    assert not [i for i in ids if i.startswith("rate-")] and "axes_2" not in ids
    text = svg_text(svg)
    assert "no errors or 429 answers in any run" in text and "429 answers (per" not in text


def test_sweep_chart_puts_429s_per_task_and_errors_in_panels_of_their_own(tmp_path: Path) -> None:
    _, svg = ALL["sweep"](tmp_path / "sweep")
    ids = set(svg_ids(svg))
    assert {"sweep-throughput", "sweep-p95", "sweep-429", "sweep-errors"} <= ids
    assert {i for i in ids if i.startswith("sweep-knee")} == {f"sweep-knee-{k}" for k in range(3)}
    assert drawn_vertices(svg, "sweep-429") == 5
    text = svg_text(svg)
    assert "429 answers per task (429s ÷ tasks)" in text and "429s per task" in text
    assert "errors (% of tasks that failed)" in text and "errors, % of tasks" in text
    # 1.5 429s per task is drawn as 1.5, not 150 "per 100 tasks" on an errors axis.
    assert "1.5" in lines(text) and "150" not in lines(text)


def test_sweep_chart_knee_label_sits_above_the_plot(tmp_path: Path) -> None:
    _, svg = charts.sweep_chart(
        LEVELS, 8, tmp_path / "sweep", "tasks/s", knee_label="rate-limit knee 8 tasks/s"
    )
    root = ET.parse(svg).getroot()
    label = next(
        e for e in root.iter() if e.tag.endswith("text") and e.text == "rate-limit knee 8 tasks/s"
    )
    frame = element(svg, "axes_1").find("./*/{http://www.w3.org/2000/svg}path")
    assert frame is not None
    top = min(float(y) for y in re.findall(r"[ML] [\d.]+ ([\d.]+)", frame.attrib["d"]))
    assert float(label.attrib["y"]) < top  # SVG y grows downwards: above the axes' frame
    assert "knee 8" not in lines(svg_text(svg))


def test_a_sweep_without_errors_or_429s_draws_no_panel_of_zeros(tmp_path: Path) -> None:
    quiet = [level(1, 10), level(2, 19), level(4, 30)]
    _, svg = charts.sweep_chart(quiet, 4, tmp_path / "sweep", "concurrency")
    ids = set(svg_ids(svg))
    assert "sweep-429" not in ids and "sweep-errors" not in ids
    assert "axes_3" not in ids  # throughput and its P95 twin only
    assert "no errors or 429 answers at any level" in svg_text(svg)
    assert "knee 4" in lines(svg_text(svg))


def test_a_one_level_sweep_draws_points_not_a_curve(tmp_path: Path) -> None:
    _, svg = charts.sweep_chart([level(4, 30, 0.0, 0.2)], None, tmp_path / "one", "concurrency")
    for series in ("sweep-throughput", "sweep-p95", "sweep-429"):
        assert drawn_vertices(svg, series) == 0, series
    assert not [i for i in svg_ids(svg) if i.startswith("sweep-knee")]
    several = charts.sweep_chart(LEVELS[:2], None, tmp_path / "two", "concurrency")[1]
    assert drawn_vertices(several, "sweep-throughput") == 2


EMPTY: dict[str, Chart] = {
    "timeline": lambda stem: charts.latency_timeline({"v1": []}, stem),
    "changes": lambda stem: charts.change_forest([], [], stem),
    "tokens": lambda stem: charts.tokens_per_second(["v1"], [None], stem),
}


@pytest.mark.parametrize("name", list(EMPTY))
def test_empty_input_draws_a_no_data_note(name: str, tmp_path: Path) -> None:
    _, svg = check_files(EMPTY[name](tmp_path / "empty"), tmp_path / "empty")
    assert "no data" in svg_text(svg)
    assert not [i for i in svg_ids(svg) if re.match(r"(p95|p50|done|change|tokens)-", i)]
