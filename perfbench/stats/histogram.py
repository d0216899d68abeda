"""A latency distribution: exact while small, HDR-backed when large, mergeable always.

Percentiles use the nearest-rank definition (the ``ceil(p/100·n)``-th smallest value), which is
also what HdrHistogram's Java and C versions return. While there are at most ``exact_limit``
values they are kept raw (8 bytes each) and every statistic is exact; past that the values move
into an HDR histogram (3 significant figures, 1 µs to 1 h) so memory stays bounded, and mean and
standard deviation continue from running sums (Chan et al.'s pairwise update), never from the
slow HDR iterator. Values go into the HDR histogram in batches (``BATCH``), each batch counted
by bucket first (numpy), so a bucket is one record however many values fell in it: hdrh records
in pure Python, ~1.2 µs a value, and a long run's groups pass their exact values (a million
short tasks: 16 histograms a sample).
"""

from __future__ import annotations

import ctypes
import functools
import math
import sys
from array import array
from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
US = 1_000_000
HIGHEST_US = 3600 * US  # one hour: above any sane task timeout
SIGFIGS = 3
EXACT = 20_000  # values a histogram keeps as they are
BATCH = 4096  # values held, once past the exact ones, before they go into the HDR histogram


def percentile_key(p: float) -> str:
    """``99.9`` → ``p99_9``, the name used in JSON and tables."""
    return "p" + f"{p:g}".replace(".", "_")


def new_hdr() -> HdrHistogram:
    """Every histogram perfbench makes has this one layout, so merging is a plain array add."""
    return HdrHistogram(1, HIGHEST_US, SIGFIGS)


_LAYOUT = new_hdr()
# A value's bucket is its bit length beyond the sub-buckets' (hdrh's _get_bucket_index), and
# the lowest value of its slot keeps that many high bits: recording it counts the same slot.
_SUB_MASK: int = _LAYOUT.sub_bucket_mask
_SUB_BITS: int = _LAYOUT.sub_bucket_half_count_magnitude + 1


def prepare() -> None:
    """Import numpy now, before a pass that will take a histogram past its exact values:
    imported then, it would hold the loop ~50 ms while tasks are in flight."""
    import numpy  # noqa: F401


def record(hdr: HdrHistogram, values: array[float]) -> int:
    """Record ``values`` (seconds) into ``hdr`` at once, as µs: each rounded, clipped to the
    histogram's range, then taken to the lowest value of its HDR slot, and each slot recorded
    once with its count, so the counts are those of a record per value. Returns how many
    values were clipped."""
    import numpy as np  # pandas' dependency; only a long run's histograms come here

    us = np.rint(np.frombuffer(values, dtype=np.float64) * US)
    clipped = int(np.count_nonzero((us < 0) | (us > HIGHEST_US)))
    ints = np.clip(us, 0, HIGHEST_US).astype(np.int64)
    # frexp's exponent of a whole number below 2**53 is its bit length.
    shift = np.maximum(np.frexp((ints | _SUB_MASK).astype(np.float64))[1] - _SUB_BITS, 0)
    slots, counts = np.unique((ints >> shift) << shift, return_counts=True)
    for value, count in zip(slots.tolist(), counts.tolist(), strict=True):
        hdr.record_value(value, count)
    return clipped


class _Spilled:
    """A histogram's part once its values have moved into HDR: the HDR histogram, the next
    batch for it, and the running count, mean, sum of squared deviations and extremes (Chan et
    al.'s pairwise update). Apart from ``Histogram``, so an exact one (most of a many-case
    run's: ~22 a case) is three slots, not ten."""

    __slots__ = ("clipped", "hdr", "high", "low", "m2", "mean", "n", "pending")

    def __init__(self, hdr: HdrHistogram) -> None:
        self.hdr = hdr
        self.pending = array("d")
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.low = math.inf
        self.high = -math.inf
        self.clipped = 0  # values outside 0..1 h, recorded at the nearest edge of the range

    def settle(self) -> None:
        """The values held since the last batch, into the running state and the HDR part."""
        pending = self.pending
        if not pending:
            return
        import numpy as np

        self.pending = array("d")
        values = np.frombuffer(pending, dtype=np.float64)
        mean = float(values.mean())
        m2 = float(np.square(values - mean).sum())
        self.combine(len(values), mean, m2, float(values.min()), float(values.max()))
        self.clipped += record(self.hdr, pending)

    def combine(self, n: int, mean: float, m2: float, low: float, high: float) -> None:
        """Another set's count, mean, sum of squared deviations and extremes."""
        total = self.n + n
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.n * n / total
        self.mean += delta * n / total
        self.n = total
        self.low = min(self.low, low)
        self.high = max(self.high, high)


class Histogram:
    __slots__ = ("_big", "_raw", "exact_limit")

    def __init__(self, exact_limit: int = EXACT) -> None:
        self.exact_limit = exact_limit
        # The values while exact (``_big`` None), made at the first one: a many-case run has
        # ~22 histograms a case, most of them empty (100,000 cases × 22 empty arrays: 140 MB).
        self._raw: array[float] | None = None
        self._big: _Spilled | None = None  # past the exact values

    def add(self, value: float) -> None:
        raw = self._raw
        if raw is not None:  # the per-sample path while exact: one append
            raw.append(value)
            if len(raw) > self.exact_limit:
                self._spill()
        elif self._big is None:  # the first value
            self._raw = array("d", (value,))
            if self.exact_limit < 1:
                self._spill()
        else:  # and after: one append, and a batch now and then
            pending = self._big.pending
            pending.append(value)
            if len(pending) >= BATCH:
                self._big.settle()

    @property
    def clipped(self) -> int:
        """Values outside 0..1 h, recorded at the nearest edge of the HDR range."""
        big = self._settled()
        return big.clipped if big is not None else 0

    def add_count(self, value: float, count: int) -> None:
        """``count`` values equal to ``value`` (a sample's bucketed gaps): one HDR record and
        one pairwise mean update, not ``count`` of each."""
        big = self._big
        if big is None:
            self._exact(array("d", (value,)) * count)
            return
        big.combine(count, value, 0.0, value, value)
        us = round(value * US)
        if us < 0 or us > HIGHEST_US:
            big.clipped += count
            us = min(max(us, 0), HIGHEST_US)
        big.hdr.record_value(us, count)

    def _exact(self, values: array[float]) -> None:
        """``values`` added while this histogram is exact (spilled past ``exact_limit``)."""
        if self._raw is None:
            self._raw = array("d")
        self._raw.extend(values)
        if len(self._raw) > self.exact_limit:
            self._spill()

    def _spill(self) -> _Spilled:
        raw, self._raw = self._raw, None
        big = self._big = _Spilled(new_hdr())
        if raw is not None:
            big.pending = raw
        big.settle()
        return big

    def _settled(self) -> _Spilled | None:
        """The HDR part with every value in it (None while exact)."""
        big = self._big
        if big is not None:
            big.settle()
        return big

    def merge(self, other: Histogram) -> None:
        """Add every value of ``other`` (lossless while both are exact; HDR-precise after)."""
        theirs = other._settled()
        if theirs is None:
            if other._raw is None:
                return
            if self._big is None:
                self._exact(other._raw)
            else:
                self._big.pending.extend(other._raw)
                self._big.settle()
            return
        mine = self._settled() or self._spill()
        mine.hdr.add(theirs.hdr)
        if theirs.n:
            mine.combine(theirs.n, theirs.mean, theirs.m2, theirs.low, theirs.high)
        mine.clipped += theirs.clipped

    def __getstate__(self) -> tuple[Any, ...]:
        # Worker processes send their histograms to the parent: the HDR part travels as its
        # compressed blob (hdrh's ctypes counts array does not pickle), the rest as it is.
        big = self._settled()
        raw = self._raw.tobytes() if self._raw is not None else None
        if big is None:
            return (self.exact_limit, raw, None, 0, 0.0, 0.0, math.inf, -math.inf, 0)
        return (self.exact_limit, raw, big.hdr.encode(), big.n, big.mean, big.m2, big.low,
                big.high, big.clipped)  # fmt: skip

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        limit, raw, hdr, n, mean, m2, low, high, clipped = state
        self.exact_limit = limit
        self._raw = None
        if raw is not None:
            self._raw = array("d")
            self._raw.frombytes(raw)
        self._big = None
        if hdr is not None:
            big = self._big = _Spilled(HdrHistogram.decode(hdr))
            big.n, big.mean, big.m2, big.low, big.high = n, mean, m2, low, high
            big.clipped = clipped

    @property
    def exact(self) -> bool:
        return self._big is None

    @property
    def count(self) -> int:
        big = self._big
        if big is None:
            return len(self._raw) if self._raw is not None else 0
        return big.n + len(big.pending)

    @property
    def min(self) -> float | None:
        big = self._settled()
        if big is None:
            return min(self._raw) if self._raw else None
        return big.low

    @property
    def max(self) -> float | None:
        big = self._settled()
        if big is None:
            return max(self._raw) if self._raw else None
        return big.high

    @property
    def mean(self) -> float | None:
        big = self._settled()
        if big is None:
            return math.fsum(self._raw) / len(self._raw) if self._raw else None
        return big.mean

    @property
    def stddev(self) -> float | None:
        """Sample standard deviation (n − 1); undefined for fewer than two values."""
        n = self.count
        if n < 2:
            return None
        big = self._settled()
        if big is None:
            assert self._raw is not None
            mean = math.fsum(self._raw) / n
            return math.sqrt(math.fsum((v - mean) ** 2 for v in self._raw) / (n - 1))
        return math.sqrt(big.m2 / (n - 1))

    def percentiles(self, ps: Iterable[float] = PERCENTILES) -> dict[float, float]:
        ps = list(ps)
        if not self.count:
            return {}
        big = self._settled()
        if big is None:
            ordered = sorted(self._raw or ())
            return {p: ordered[_rank(p, len(ordered))] for p in ps}
        values = big.hdr.get_percentile_to_value_dict(ps)
        return {p: values[p] / US for p in ps}

    def encode(self) -> str:
        """The distribution as an HDR 'histoblob' (base64 text) for summary.json."""
        big = self._settled()
        if big is not None:
            return _text(big.hdr)
        # An exact histogram (most cases' of a many-case run) is written through one scratch
        # HDR histogram: a new one per blob is 184 KiB of counts that, tied in a cycle with
        # its encoder, only the cyclic GC frees (1,000 cases: +400 MB peak RSS).
        hdr = _scratch()
        raw = self._raw or array("d")
        try:
            if len(raw) < BATCH:  # a short run's: not worth numpy's import (~50 ms, 10 MiB)
                for v in raw:
                    hdr.record_value(min(max(round(v * US), 0), HIGHEST_US))
            else:
                record(hdr, raw)
            return _text(hdr)
        finally:
            _clear(hdr)

    def summary(self) -> dict[str, Any] | None:
        """n, min, max, mean, stddev and the standard percentiles, in seconds; None if empty."""
        if not self.count:
            return None
        raw = self._raw
        if raw is not None and len(raw) == 1:  # most cases' of a many-case run: one value
            v = raw[0]
            one = {"n": 1, "min": v, "max": v, "mean": math.fsum(raw), "stddev": None}
            return {**one, **dict.fromkeys(_KEYS, v), "method": "exact"}
        out: dict[str, Any] = {
            "n": self.count,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "stddev": self.stddev,
        }
        out.update({percentile_key(p): v for p, v in self.percentiles().items()})
        out["method"] = "exact" if self.exact else "hdr"
        if self.clipped:
            out["clipped"] = self.clipped
        return out


_KEYS = tuple(percentile_key(p) for p in PERCENTILES)


def _rank(p: float, n: int) -> int:
    """Zero-based index of the nearest-rank percentile ``p`` among ``n`` sorted values."""
    # The small epsilon keeps float noise (99.9 * 1000 / 100 = 999.0000000000001) from
    # pushing an exact rank up by one, as Java's nextAfter(p, -inf) does.
    return min(n - 1, max(0, math.ceil(p * n / 100 - 1e-9) - 1))


def decode(blob: str) -> HdrHistogram:
    """Inverse of ``Histogram.encode``: merge these with ``add`` to pool runs (``pool``
    does, freeing each as it goes), or ``release`` it when done."""
    return HdrHistogram.decode(blob.encode("ascii"))


def release(hdr: HdrHistogram) -> None:
    """Free ``hdr``'s counts now. An hdrh histogram and its encoder refer to each other, so
    only the cyclic GC frees them, and it does not see the 184 KiB of ctypes counts each
    holds: decoding a blob per case of a 10^4-case run would hold gigabytes until then."""
    hdr.encoder = None


def pool(blobs: Iterable[str]) -> HdrHistogram:
    """One histogram of every encoded one in ``blobs`` (lossless: one layout), each decoded
    and freed in turn, so memory stays at two histograms however many there are."""
    merged = new_hdr()
    for blob in blobs:
        one = decode(blob)
        merged.add(one)
        release(one)
    return merged


def _text(hdr: HdrHistogram) -> str:
    blob: bytes = hdr.encode()
    return blob.decode("ascii")


@functools.cache
def _scratch() -> HdrHistogram:
    return new_hdr()


def _clear(hdr: HdrHistogram) -> None:
    """``hdr`` empty again, at memset's speed (hdrh's ``reset`` loops in Python)."""
    ctypes.memset(hdr.counts, 0, ctypes.sizeof(hdr.counts))
    hdr.total_count = 0
    hdr.min_value = sys.maxsize
    hdr.max_value = 0
