from __future__ import annotations

import pickle
import random
import statistics
from array import array

import pytest

from perfbench.stats.histogram import (
    HIGHEST_US,
    PERCENTILES,
    US,
    Histogram,
    decode,
    new_hdr,
    percentile_key,
    record,
)


def filled(values: list[float], exact_limit: int = 20_000) -> Histogram:
    h = Histogram(exact_limit=exact_limit)
    for v in values:
        h.add(v)
    return h


def test_nearest_rank_percentiles_on_one_to_hundred() -> None:
    h = filled([i / 1000 for i in range(1, 101)])
    p = h.percentiles()
    assert p[50.0] == 0.050
    assert p[95.0] == 0.095
    assert p[99.0] == 0.099
    assert p[99.9] == 0.100


def test_small_sample_p95_is_the_largest_value() -> None:
    # HdrHistogram_py rounds the rank and returns a value between the 11th and 12th;
    # nearest rank (Java/C semantics) gives the 12th.
    assert filled([float(i) for i in range(1, 13)]).percentiles([95.0]) == {95.0: 12.0}


def test_float_noise_does_not_push_the_rank_up() -> None:
    h = filled([float(i) for i in range(1, 1001)])
    assert h.percentiles([99.9]) == {99.9: 999.0}


def test_mean_and_stddev_match_the_statistics_module() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(-2, 0.5) for _ in range(5000)]
    h = filled(values)
    assert h.mean == pytest.approx(statistics.fmean(values), rel=1e-12)
    assert h.stddev == pytest.approx(statistics.stdev(values), rel=1e-9)


def test_stddev_needs_two_values_and_empty_has_no_summary() -> None:
    assert filled([1.0]).stddev is None
    assert Histogram().summary() is None
    assert Histogram().percentiles() == {}


def test_spill_to_hdr_keeps_percentiles_within_precision() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(-1, 0.7) for _ in range(3000)]
    exact = filled(values).percentiles()
    spilled = filled(values, exact_limit=100)
    assert not spilled.exact
    approx = spilled.percentiles()
    for p, v in exact.items():
        assert approx[p] == pytest.approx(v, rel=2e-3)  # 3 significant figures
    assert spilled.summary()["method"] == "hdr"  # type: ignore[index]


def test_out_of_range_values_are_counted_as_clipped() -> None:
    h = filled([0.5, 7200.0], exact_limit=1)
    assert h.clipped == 1
    assert h.max == 7200.0  # the running max keeps the true value


def test_encoded_histogram_round_trips_and_merges() -> None:
    a = filled([0.1, 0.2, 0.3])
    b = filled([0.4])
    merged = decode(a.encode())
    merged.add(decode(b.encode()))
    assert merged.get_total_count() == 4
    assert merged.get_max_value() == pytest.approx(400_000, rel=1e-3)


def test_percentile_keys() -> None:
    assert [percentile_key(p) for p in (50.0, 99.9)] == ["p50", "p99_9"]


@pytest.mark.parametrize("limit", [10_000, 50, 5], ids=["exact", "spills-on-merge", "both-hdr"])
def test_merge_equals_recording_everything_in_one(limit: int) -> None:
    rng = random.Random(11)
    a_values = [rng.lognormvariate(-2, 0.6) for _ in range(40)]
    b_values = [rng.lognormvariate(-1, 0.4) for _ in range(30)]
    merged = filled(a_values, limit)
    merged.merge(filled(b_values, limit))
    whole = filled(a_values + b_values, limit)
    assert merged.count == whole.count == 70
    assert merged.exact == whole.exact
    assert merged.mean == pytest.approx(whole.mean, rel=1e-12)
    assert merged.stddev == pytest.approx(whole.stddev, rel=1e-9)
    assert (merged.min, merged.max) == (whole.min, whole.max)
    assert merged.percentiles() == whole.percentiles()


def test_a_batch_counts_every_slot_as_a_record_per_value_would() -> None:
    # Whole-µs values in every part of the layout: 0, the exact sub-buckets (< 2,048 µs),
    # bucket edges, wide buckets near the hour, and values clipped at both ends.
    rng = random.Random(5)
    seconds = [rng.lognormvariate(-3, 2.5) for _ in range(20_000)]
    seconds += [0.0, 2047e-6, 2048e-6, 2049e-6, 4095e-6, 4096e-6, 3599.999, 3600.0, 7200.0, -1.0]
    one_by_one = new_hdr()
    clipped = 0
    for v in seconds:
        us = round(v * US)
        clipped += us < 0 or us > HIGHEST_US
        one_by_one.record_value(min(max(us, 0), HIGHEST_US))
    batched = new_hdr()
    assert record(batched, array("d", seconds)) == clipped == 2
    assert batched.get_total_count() == one_by_one.get_total_count() == len(seconds)
    assert list(batched.counts) == list(one_by_one.counts)


def test_past_its_exact_values_a_histogram_is_the_same_batched_or_not() -> None:
    # 10,000 values past an exact limit of 100: held and recorded in batches of BATCH.
    rng = random.Random(8)
    values = [rng.lognormvariate(-1, 0.9) for _ in range(10_000)] + [7200.0]
    h = filled(values, exact_limit=100)
    assert h.count == len(values) and not h.exact
    reference = new_hdr()
    for v in values:
        reference.record_value(min(round(v * US), HIGHEST_US))
    expected = reference.get_percentile_to_value_dict(list(PERCENTILES))
    assert h.percentiles() == {p: expected[p] / US for p in PERCENTILES}
    assert h.mean == pytest.approx(statistics.fmean(values), rel=1e-12)
    assert h.stddev == pytest.approx(statistics.stdev(values), rel=1e-9)
    assert (h.min, h.max, h.clipped) == (min(values), max(values), 1)
    h.add(0.5)  # held again after a read, counted at once
    assert h.count == len(values) + 1
    again = pickle.loads(pickle.dumps(h))  # as a worker hands it over
    assert again.count == h.count and again.percentiles() == h.percentiles()
