"""Caller text (run labels, case names) fitted to a chart: measured with matplotlib's own font
metrics and broken into lines no wider than the room the chart gives it. A legend entry or a
tick label wider than the figure leaves constrained layout no room for the plot: matplotlib
warns "axes sizes collapsed to zero" and draws the chart squeezed to nothing."""

from __future__ import annotations

import textwrap
from functools import lru_cache

from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

_POINTS = 72.0  # a font's metrics are in points, 72 to the inch
_TEXT = TextToPath()


@lru_cache(maxsize=4096)
def inches(text: str, size: float) -> float:
    """How wide ``text`` is drawn on one line at ``size`` points, in the default font."""
    width, _, _ = _TEXT.get_text_width_height_descent(text, FontProperties(size=size), False)
    return float(width) / _POINTS


def fit(text: str, room: float, size: float) -> str:
    """``text`` broken at spaces (or inside a word too long for a line) into lines at most
    ``room`` inches wide at ``size`` points; as it is if it fits. Every character is kept but
    the spaces a line breaks at."""
    if inches(text, size) <= room:
        return text
    chars = max(1, int(len(text) * room / max(inches(text, size), 1e-9)))
    while True:  # a guess from the mean glyph, narrowed until every line fits: a few rounds
        lines = textwrap.wrap(text, chars, break_on_hyphens=False, drop_whitespace=True)
        if chars == 1 or all(inches(line, size) <= room for line in lines):
            return "\n".join(lines) if lines else text
        chars = max(1, int(chars * 0.9))


def widest(texts: list[str], size: float) -> float:
    """Inches the widest line of ``texts`` takes at ``size`` points."""
    return max((inches(line, size) for text in texts for line in text.split("\n")), default=0.0)


def lines(texts: list[str]) -> list[int]:
    return [text.count("\n") + 1 for text in texts]
