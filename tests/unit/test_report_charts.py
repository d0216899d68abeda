"""The report charts: valid PNG and SVG, run labels as searchable SVG text, one plotted series
per run (counted by the stable SVG ids the charts set), byte-identical output for the same
input, fixed run colours, and a "no data" note instead of an exception on empty input."""

from __future__ import annotations

import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import matplotlib.image
import pytest

from perfbench.report import charts, split_chart

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LONG = "anthropic/claude-sonnet-4 @ us-east-1 (baseline run)"  # ~40 characters and more
SHORT = "candidate"
PERCENTILES = (0.0, 50.0, 90.0, 99.0, 99.9)

Chart = Callable[[Path], list[Path]]


def svg_text(path: Path) -> str:
    return "\n".join(ET.parse(path).getroot().itertext())


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n")]


def svg_ids(path: Path) -> list[str]:
    return [el.attrib["id"] for el in ET.parse(path).getroot().iter() if "id" in el.attrib]


def plotted(path: Path, prefix: str) -> set[str]:
    """Ids of the bars or lines a chart drew, e.g. ``bar-r0-c1`` or ``line-r1``."""
    return {i for i in svg_ids(path) if re.fullmatch(rf"{prefix}-r\d+(-c\d+)?", i)}


def check_files(paths: list[Path], stem: Path) -> tuple[Path, Path]:
    png, svg = paths
    assert (png, svg) == (stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.svg")
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[2] in (3, 4)
    assert image.shape[0] >= 250 and image.shape[1] >= 600
    assert image.std() > 0  # something was drawn
    assert ET.parse(svg).getroot().tag.endswith("svg")
    return png, svg


def latency(stem: Path) -> list[Path]:
    return charts.latency_distribution(
        {
            LONG: [(p, 0.5 + p / 100) for p in PERCENTILES],
            SHORT: [(p, 0.4 + p / 50) for p in PERCENTILES],
        },
        stem,
    )


def cases(stem: Path) -> list[Path]:
    return charts.case_bars(
        ["greet", "translate", "search"],
        {
            LONG: {"greet": (0.5, 0.4, 0.7), "translate": None, "search": (1.5, 1.2, 1.9)},
            SHORT: {"greet": (0.6, 0.6, 0.6), "translate": (0.9, 0.8, 1.0)},  # search absent
        },
        stem,
    )


def throughput(stem: Path) -> list[Path]:
    return charts.throughput_errors(
        [LONG, SHORT], [(5.0, 4.5, 5.5), None], [0.01, 0.0], [None, 0.25], stem
    )


def cost(stem: Path) -> list[Path]:
    return charts.language_cost(
        ["en", "zh", "ja"],
        {LONG: {"en": 0.002, "zh": None, "ja": 0.001}, SHORT: {"en": 0.003, "zh": 0.004}},
        stem,
        note="simulated prices",
    )


def timeline(stem: Path) -> list[Path]:
    return charts.adaptive_timeline(
        {LONG: [(0.0, 1), (2.0, 2), (4.0, 4), (6.0, 3)], SHORT: [(0.0, 2), (3.0, 4)]}, stem
    )


ALL: dict[str, Chart] = {
    "latency": latency,
    "cases": cases,
    "throughput": throughput,
    "cost": cost,
    "timeline": timeline,
}


def test_latency_distribution_draws_one_line_per_run_on_hdr_ticks(tmp_path: Path) -> None:
    series = {
        LONG: [(p, 0.5 + p / 100) for p in PERCENTILES] + [(100.0, 9.0)],  # 100: no x, dropped
        SHORT: [(p, 0.4) for p in PERCENTILES[:3]],
        "empty run": [],
    }
    _, svg = check_files(charts.latency_distribution(series, tmp_path / "lat"), tmp_path / "lat")
    assert plotted(svg, "line") == {"line-r0", "line-r1"}
    text = svg_text(svg)
    assert all(label in text for label in series)  # legend keeps the empty run too
    ticks = {"0%", "90%", "99%", "99.9%"}
    assert ticks <= set(lines(text))
    assert "99.99%" not in text  # ticks stop at the largest percentile present
    assert "Task latency by percentile" in text and "latency (ms)" in text


def test_case_bars_draws_a_bar_and_whisker_per_present_value(tmp_path: Path) -> None:
    _, svg = check_files(cases(tmp_path / "cases"), tmp_path / "cases")
    assert plotted(svg, "bar") == {"bar-r0-c0", "bar-r0-c2", "bar-r1-c0", "bar-r1-c1"}
    assert {i for i in svg_ids(svg) if "whisker" in i} == {"bar-whisker-r0", "bar-whisker-r1"}
    text = svg_text(svg)
    assert LONG in text and SHORT in text and "translate" in text
    assert "P95 (ms; bars: median across runs, whiskers: min–max)" in text
    assert lines(text).count("n/a") == 2  # the None and the absent case


def test_case_bars_grows_with_the_number_of_cases(tmp_path: Path) -> None:
    one = charts.case_bars(["only"], {SHORT: {"only": (0.1, 0.1, 0.2)}}, tmp_path / "one")
    names = [f"case-{j:02d}" for j in range(40)]
    runs = {
        f"run {i} {LONG}": {n: (0.1 * j, 0.05, 0.2 * j) for j, n in enumerate(names)}
        for i in range(6)
    }
    many = charts.case_bars(names, runs, tmp_path / "many")
    small, big = (matplotlib.image.imread(paths[0]).shape for paths in (one, many))
    assert big[0] > 10 * small[0] and big[1] == small[1]
    assert len(plotted(many[1], "bar")) == 40 * 6


def test_throughput_errors_has_both_panels(tmp_path: Path) -> None:
    _, svg = check_files(throughput(tmp_path / "tp"), tmp_path / "tp")
    assert plotted(svg, "throughput") == {"throughput-r0-c0"}  # SHORT has no throughput
    assert plotted(svg, "rate") == {"rate-r0-c0", "rate-r1-c0", "rate-r1-c1"}  # LONG: no 429s
    assert {i for i in svg_ids(svg) if "whisker" in i} == {"throughput-whisker-r0"}
    text = svg_text(svg)
    assert LONG in text and SHORT in text
    assert "25.0" in text and "1.0" in text  # rates are fractions, labelled in %
    assert lines(text).count("n/a") == 2


def test_throughput_errors_rejects_misaligned_sequences(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        charts.throughput_errors([LONG, SHORT], [None], [0.0, 0.0], [0.0, 0.0], tmp_path / "x")


def test_language_cost_marks_unpriced_and_shows_the_note(tmp_path: Path) -> None:
    _, svg = check_files(cost(tmp_path / "cost"), tmp_path / "cost")
    assert plotted(svg, "bar") == {"bar-r0-c0", "bar-r0-c2", "bar-r1-c0", "bar-r1-c1"}
    text = svg_text(svg)
    assert lines(text).count("unpriced") == 2  # LONG zh (None), SHORT ja (absent)
    assert "simulated prices" in text and "USD per task" in text
    assert LONG in text and SHORT in text


def test_adaptive_timeline_steps_once_per_run(tmp_path: Path) -> None:
    _, svg = check_files(timeline(tmp_path / "adapt"), tmp_path / "adapt")
    assert plotted(svg, "line") == {"line-r0", "line-r1"}
    text = svg_text(svg)
    assert LONG in text and SHORT in text and "concurrency limit" in text
    # where="post": each of the 4 points but the last adds a horizontal and a vertical segment.
    root = ET.parse(svg).getroot()
    line = next(el for el in root.iter() if el.attrib.get("id") == "line-r0")
    path = next(el for el in line.iter() if el.tag.endswith("path"))
    assert path.attrib["d"].count("L") == 2 * 4 - 2


@pytest.mark.parametrize("name", list(ALL))
def test_same_input_gives_identical_bytes(name: str, tmp_path: Path) -> None:
    first = ALL[name](tmp_path / "a")
    second = ALL[name](tmp_path / "b")
    for one, two in zip(first, second, strict=True):
        assert one.read_bytes() == two.read_bytes()
    png, svg = (p.read_bytes() for p in first)
    assert b"Software" not in png and b"<dc:date>" not in svg and b"<dc:creator>" not in svg


def test_a_run_keeps_its_colour_in_every_chart(tmp_path: Path) -> None:
    colours = []
    for name, ident in (("latency", "line-r1"), ("cases", "bar-r1-c0"), ("cost", "bar-r1-c0")):
        svg = ALL[name](tmp_path / name)[1].read_text()
        element = re.search(rf'id="{ident}">\s*<path[^>]*style="([^"]*)"', svg)
        assert element is not None
        colours.append(re.findall(r"(?:fill|stroke): (#[0-9a-f]{6})", element.group(1)))
    assert colours[0][0] == colours[1][0] == colours[2][0] == "#ff7f0e"


EMPTY: dict[str, Chart] = {
    "latency no runs": lambda stem: charts.latency_distribution({}, stem),
    "latency no points": lambda stem: charts.latency_distribution({LONG: []}, stem),
    "cases no cases": lambda stem: charts.case_bars([], {}, stem),
    "cases all None": lambda stem: charts.case_bars(["a", "b"], {LONG: {"a": None}}, stem),
    "throughput no runs": lambda stem: charts.throughput_errors([], [], [], [], stem),
    "throughput all None": lambda stem: charts.throughput_errors(
        [LONG], [None], [None], [None], stem
    ),
    "cost no languages": lambda stem: charts.language_cost([], {LONG: {}}, stem),
    "cost all unpriced": lambda stem: charts.language_cost(["en"], {LONG: {"en": None}}, stem),
    "timeline no history": lambda stem: charts.adaptive_timeline({LONG: []}, stem),
}


@pytest.mark.parametrize("name", list(EMPTY))
def test_empty_input_draws_a_no_data_note(name: str, tmp_path: Path) -> None:
    _, svg = check_files(EMPTY[name](tmp_path / "empty"), tmp_path / "empty")
    assert "no data" in svg_text(svg)
    assert not plotted(svg, "(bar|line|throughput|rate)")


def test_text_is_shown_literally_and_dotted_stems_keep_their_name(tmp_path: Path) -> None:
    label = "price $in$ and $out$"  # two pairs of $ would be mathtext if not escaped
    paths = charts.adaptive_timeline({label: [(0.0, 1.0)]}, tmp_path / "run.v1")
    _, svg = check_files(paths, tmp_path / "run.v1")
    assert label in svg_text(svg)


# Run labels as long as users give them (test_hostile_report's, and one 300-character word):
# an entry wider than the figure left constrained layout no room for the plot, and matplotlib
# warned "axes sizes collapsed to zero" and drew the chart squeezed.
HOSTILE = [
    "![p](http://127.0.0.1:9/md-image.png) [x](javascript:window.pwned=1) v1",
    "<script>window.pwned=2</script><img src=http://127.0.0.1:9/raw-img.png "
    "onerror=window.pwned=3> [y](http://127.0.0.1:9/link) **b** `c` "
    "\\![z](http://127.0.0.1:9/escaped.png) <a href=javascript:x>v2</a> $5",
    "w" * 300,
]


def hostile_charts() -> dict[str, Chart]:
    grid = {label: [(p, 0.5 + i + p / 100) for p in PERCENTILES] for i, label in enumerate(HOSTILE)}
    per_case = {
        label: {"greet " * 20: (0.5, 0.4, 0.7), "x" * 200: (1.0, 1.0, 1.0)} for label in HOSTILE
    }
    parts = {"model": 0.2, "tool": 0.1, "agent": 0.05, "client": 0.01}
    return {
        "latency": lambda stem: charts.latency_distribution(grid, stem),
        "cases": lambda stem: charts.case_bars(["greet " * 20, "x" * 200], per_case, stem),
        "throughput": lambda stem: charts.throughput_errors(
            HOSTILE, [(5.0, 4.5, 5.5)] * 3, [0.01, 0.0, 0.2], [None, 0.25, 0.0], stem
        ),
        "tokens": lambda stem: charts.tokens_per_second(HOSTILE, [(50.0, 40.0, 60.0)] * 3, stem),
        "timeline": lambda stem: charts.adaptive_timeline(
            {label: [(0.0, 1), (2.0, 2)] for label in HOSTILE}, stem
        ),
        "split": lambda stem: split_chart.draw(
            {label: {"greet " * 20: parts, "x" * 200: parts} for label in HOSTILE}, stem
        ),
    }


@pytest.mark.parametrize("name", list(hostile_charts()))
def test_long_labels_fit_and_keep_every_character(name: str, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "constrained_layout not applied"
        _, svg = check_files(hostile_charts()[name](tmp_path / name), tmp_path / name)
    text = "".join(svg_text(svg).split())
    assert all("".join(label.split()) in text for label in HOSTILE)
