"""A fixed set of distributions (one scope's latency, TTFT, TPOT, ...), held by what was
recorded (issue 38).

A run of 10^5 prompts has a set per case, and most cases have one task: as one ``Histogram``
per metric, each with its one-value array, a case held ~2.6 KB of histograms for ~20 numbers.
Here each distribution's first value sits in one array shared by the set (NaN while it has
none), and a ``Histogram`` is made only at its second value: a one-task case's figures are
one array, and a case of many tasks has the histograms it needs, exact until they spill.

Every read is that of a ``Histogram`` of the same values: a one-value distribution is read
through a ``Histogram`` made for the read (``histogram``), so its figures are the same."""

from __future__ import annotations

import math
from array import array
from typing import Any

from perfbench.stats.histogram import Histogram

_NONE = math.nan  # a first value not yet recorded (a recorded NaN goes to a histogram)


class Distributions:
    """``size`` distributions, each by its index; ``add``, ``merge`` and reads by index."""

    __slots__ = ("_first", "_more")

    def __init__(self, size: int) -> None:
        self._first = array("d", (_NONE,)) * size  # a distribution's one value, or NaN
        # The histograms of the distributions past one value (None until one is).
        self._more: list[Histogram | None] | None = None

    def add(self, i: int, value: float) -> None:
        more = self._more
        if more is not None:
            h = more[i]
            if h is not None:  # the per-sample path of a case with many tasks
                h.add(value)
                return
        first = self._first
        if math.isnan(first[i]) and not math.isnan(value):
            first[i] = value
            return
        self._histogram(i).add(value)

    def add_count(self, i: int, value: float, count: int) -> None:
        """``count`` values equal to ``value`` (``Histogram.add_count``)."""
        if count == 1:
            self.add(i, value)
        else:
            self._histogram(i).add_count(value, count)

    def _histogram(self, i: int) -> Histogram:
        """Distribution ``i``'s histogram, made now with its one value if it has none."""
        more = self._more
        if more is None:
            more = self._more = [None] * len(self._first)
        h = more[i]
        if h is None:
            h = more[i] = Histogram()
            held = self._first[i]
            if not math.isnan(held):
                h.add(held)
                self._first[i] = _NONE
        return h

    def histogram(self, i: int) -> Histogram:
        """Distribution ``i`` to read (count, summary, percentiles, encode). A one-value or
        empty one is a ``Histogram`` made for the read: add nothing to it."""
        more = self._more
        if more is not None:
            h = more[i]
            if h is not None:
                return h
        read = Histogram()
        held = self._first[i]
        if not math.isnan(held):
            read.add(held)
        return read

    def count(self, i: int) -> int:
        more = self._more
        if more is not None:
            h = more[i]
            if h is not None:
                return h.count
        return 0 if math.isnan(self._first[i]) else 1

    def summary(self, i: int) -> dict[str, Any] | None:
        if not self.count(i):
            return None
        return self.histogram(i).summary()

    def merge(self, other: Distributions) -> None:
        """Add every value of ``other`` (lossless while exact, as ``Histogram.merge``)."""
        theirs = other._more
        for i, held in enumerate(other._first):
            h = theirs[i] if theirs is not None else None
            if h is not None:
                self._histogram(i).merge(h)
            elif not math.isnan(held):
                self.add(i, held)
