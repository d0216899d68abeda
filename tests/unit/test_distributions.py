"""A scope's set of distributions (stats/distributions.py): each read as a Histogram of the
same values would be, whether it holds none, one (in the shared array) or more (a histogram),
and merged losslessly whatever each side holds."""

from __future__ import annotations

import math
import pickle
import random

import pytest

from perfbench.stats.distributions import Distributions
from perfbench.stats.histogram import Histogram


def _both(values: list[float], size: int = 3, at: int = 1) -> tuple[Distributions, Histogram]:
    dists, plain = Distributions(size), Histogram()
    for v in values:
        dists.add(at, v)
        plain.add(v)
    return dists, plain


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_each_distribution_reads_as_a_histogram_of_its_values(n: int) -> None:
    rng = random.Random(n)
    dists, plain = _both([rng.lognormvariate(-3, 1) for _ in range(n)])
    assert dists.count(1) == plain.count == n
    assert dists.summary(1) == plain.summary()
    assert dists.histogram(1).percentiles() == plain.percentiles()
    if n:
        assert dists.histogram(1).encode() == plain.encode()
    assert dists.count(0) == dists.count(2) == 0 and dists.summary(0) is None


def test_one_value_is_kept_in_the_shared_array_not_a_histogram() -> None:
    dists, _ = _both([0.25])
    assert dists._more is None and dists._first[1] == 0.25
    dists.add(1, 0.5)  # the second value: a histogram with both
    assert dists._more is not None and dists._more[1] is not None
    assert math.isnan(dists._first[1]) and dists.count(1) == 2


def test_a_recorded_nan_is_counted() -> None:
    dists = Distributions(2)
    dists.add(0, math.nan)
    assert dists.count(0) == 1 and dists.count(1) == 0


def test_counted_values_are_those_of_a_histogram() -> None:
    dists, plain = Distributions(1), Histogram()
    for value, count in ((0.0009, 3), (0.0015, 1), (0.0009, 2)):
        dists.add_count(0, value, count)
        plain.add_count(value, count)
    assert dists.summary(0) == plain.summary()


def test_merging_sets_of_none_one_and_many_values_is_lossless() -> None:
    rng = random.Random(7)
    size = 4
    parts, everything = [], [Histogram() for _ in range(size)]
    for _ in range(30):
        part = Distributions(size)
        for i in range(size):
            for _ in range(rng.choice([0, 0, 1, 1, 3])):
                v = rng.uniform(0.001, 3.0)
                part.add(i, v)
                everything[i].add(v)
        parts.append(part)
    merged = Distributions(size)
    for part in parts:
        merged.merge(part)
    for i in range(size):
        assert merged.summary(i) == everything[i].summary()
    back = pickle.loads(pickle.dumps(merged))
    assert [back.summary(i) for i in range(size)] == [merged.summary(i) for i in range(size)]
