"""Memory of histograms in many-case runs (issue 38): an encoded or decoded HDR histogram
holds 184 KiB of counts that only the cyclic GC would free; perfbench frees them at once."""

from __future__ import annotations

import ctypes
import gc
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from perfbench.stats.histogram import Histogram, decode, new_hdr, pool

COUNTS = ctypes.sizeof(new_hdr().counts)  # one HDR histogram's counts, in bytes
MANY = 200


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """As in a long run between two GC passes: what only the cyclic GC frees stays."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def _held(work: Callable[[], object]) -> int:
    """Bytes still allocated after ``work`` (its result dropped), GC off."""
    with _no_cyclic_gc():
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = work()
            del result
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()


def _histogram(i: int) -> Histogram:
    h = Histogram()
    h.add(0.001 * (i + 1))
    h.add(0.5)
    return h


def test_encoding_many_exact_histograms_holds_no_hdr_counts() -> None:
    cases = [_histogram(i) for i in range(MANY)]
    held = _held(lambda: [h.encode() for h in cases])
    # Blobs are ~100 bytes each; one histogram's counts per blob was 200 × 184 KiB.
    assert held < 2 * COUNTS


def test_the_scratch_histogram_is_empty_for_the_next_blob() -> None:
    first = Histogram()
    for v in (0.1, 0.2, 3.0):
        first.add(v)
    first.encode()
    second = decode(_histogram(0).encode())
    assert second.get_total_count() == 2
    assert second.get_max_value() == pytest.approx(500_000, rel=1e-3)
    assert second.get_min_value() == pytest.approx(1_000, rel=1e-3)


def test_pooling_many_blobs_frees_each_as_it_goes() -> None:
    blobs = [_histogram(i).encode() for i in range(MANY)]
    merged = pool(blobs)
    assert merged.get_total_count() == 2 * MANY
    assert merged.get_max_value() == pytest.approx(500_000, rel=1e-3)
    held = _held(lambda: pool(blobs).get_total_count())
    assert held < 2 * COUNTS
