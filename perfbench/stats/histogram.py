"""A latency distribution: exact while small, HDR-backed when large, mergeable always.

Percentiles use the nearest-rank definition (the ``ceil(p/100·n)``-th smallest value), which is
also what HdrHistogram's Java and C versions return. While there are at most ``exact_limit``
values they are kept raw (8 bytes each) and every statistic is exact; past that the values move
into an HDR histogram (3 significant figures, 1 µs to 1 h) so memory stays bounded, and mean and
standard deviation continue from running sums (Welford), never from the slow HDR iterator.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
US = 1_000_000
HIGHEST_US = 3600 * US  # one hour: above any sane task timeout
SIGFIGS = 3


def percentile_key(p: float) -> str:
    """``99.9`` → ``p99_9``, the name used in JSON and tables."""
    return "p" + f"{p:g}".replace(".", "_")


def new_hdr() -> HdrHistogram:
    """Every histogram perfbench makes has this one layout, so merging is a plain array add."""
    return HdrHistogram(1, HIGHEST_US, SIGFIGS)


class Histogram:
    __slots__ = ("_hdr", "_m2", "_max", "_mean", "_min", "_n", "_raw", "clipped", "exact_limit")

    def __init__(self, exact_limit: int = 20_000) -> None:
        self.exact_limit = exact_limit
        self._raw: array[float] | None = array("d")
        self._hdr: HdrHistogram | None = None
        # Running state, used only once the values have moved into the HDR histogram.
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._min = math.inf
        self._max = -math.inf
        self.clipped = 0  # values outside 0..1 h, recorded at the nearest edge of the HDR range

    def add(self, value: float) -> None:
        raw = self._raw
        if raw is not None:  # the per-sample path while exact: one append
            raw.append(value)
            if len(raw) > self.exact_limit:
                self._spill()
        else:
            self._accumulate(value)

    def add_count(self, value: float, count: int) -> None:
        """``count`` values equal to ``value`` (a sample's bucketed gaps): one HDR record and
        one pairwise mean update, not ``count`` of each."""
        raw = self._raw
        if raw is not None:
            raw.extend(array("d", (value,)) * count)
            if len(raw) > self.exact_limit:
                self._spill()
            return
        n = self._n + count
        delta = value - self._mean
        self._m2 += delta * delta * self._n * count / n
        self._mean += delta * count / n
        self._n = n
        self._min = min(self._min, value)
        self._max = max(self._max, value)
        us = round(value * US)
        if us < 0 or us > HIGHEST_US:
            self.clipped += count
            us = min(max(us, 0), HIGHEST_US)
        assert self._hdr is not None
        self._hdr.record_value(us, count)

    def _spill(self) -> None:
        raw, self._raw = self._raw, None
        self._hdr = new_hdr()
        for v in raw or ():
            self._accumulate(v)

    def _accumulate(self, value: float) -> None:
        n = self._n = self._n + 1
        delta = value - self._mean
        self._mean += delta / n
        self._m2 += delta * (value - self._mean)
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value
        us = round(value * US)
        if us < 0 or us > HIGHEST_US:
            self.clipped += 1
            us = min(max(us, 0), HIGHEST_US)
        assert self._hdr is not None
        self._hdr.record_value(us)

    def merge(self, other: Histogram) -> None:
        """Add every value of ``other`` (lossless while both are exact; HDR-precise after)."""
        if other._raw is not None:
            if self._raw is not None:
                self._raw.extend(other._raw)
                if len(self._raw) > self.exact_limit:
                    self._spill()
            else:
                for v in other._raw:
                    self._accumulate(v)
            return
        if self._raw is not None:
            self._spill()
        assert self._hdr is not None and other._hdr is not None
        self._hdr.add(other._hdr)
        # Chan et al.'s pairwise update of the running mean and sum of squares.
        n = self._n + other._n
        delta = other._mean - self._mean
        self._m2 += other._m2 + delta * delta * self._n * other._n / n
        self._mean += delta * other._n / n
        self._n = n
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
        self.clipped += other.clipped

    def __getstate__(self) -> tuple[Any, ...]:
        # Worker processes send their histograms to the parent: the HDR part travels as its
        # compressed blob (hdrh's ctypes counts array does not pickle), the rest as it is.
        hdr = self._hdr.encode() if self._hdr is not None else None
        raw = self._raw.tobytes() if self._raw is not None else None
        return (self.exact_limit, raw, hdr, self._n, self._mean, self._m2, self._min,
                self._max, self.clipped)  # fmt: skip

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        limit, raw, hdr, n, mean, m2, low, high, clipped = state
        self.exact_limit = limit
        self._raw = None
        if raw is not None:
            self._raw = array("d")
            self._raw.frombytes(raw)
        self._hdr = HdrHistogram.decode(hdr) if hdr is not None else None
        self._n, self._mean, self._m2, self._min, self._max = n, mean, m2, low, high
        self.clipped = clipped

    @property
    def exact(self) -> bool:
        return self._raw is not None

    @property
    def count(self) -> int:
        return len(self._raw) if self._raw is not None else self._n

    @property
    def min(self) -> float | None:
        if self._raw is not None:
            return min(self._raw) if self._raw else None
        return self._min

    @property
    def max(self) -> float | None:
        if self._raw is not None:
            return max(self._raw) if self._raw else None
        return self._max

    @property
    def mean(self) -> float | None:
        if self._raw is not None:
            return math.fsum(self._raw) / len(self._raw) if self._raw else None
        return self._mean

    @property
    def stddev(self) -> float | None:
        """Sample standard deviation (n − 1); undefined for fewer than two values."""
        n = self.count
        if n < 2:
            return None
        if self._raw is not None:
            mean = math.fsum(self._raw) / n
            return math.sqrt(math.fsum((v - mean) ** 2 for v in self._raw) / (n - 1))
        return math.sqrt(self._m2 / (n - 1))

    def percentiles(self, ps: Iterable[float] = PERCENTILES) -> dict[float, float]:
        ps = list(ps)
        if not self.count:
            return {}
        if self._raw is not None:
            ordered = sorted(self._raw)
            return {p: ordered[_rank(p, len(ordered))] for p in ps}
        assert self._hdr is not None
        values = self._hdr.get_percentile_to_value_dict(ps)
        return {p: values[p] / US for p in ps}

    def encode(self) -> str:
        """The distribution as an HDR 'histoblob' (base64 text) for summary.json."""
        hdr = self._hdr
        if hdr is None:
            hdr = new_hdr()
            for v in self._raw or ():
                hdr.record_value(min(max(round(v * US), 0), HIGHEST_US))
        blob: bytes = hdr.encode()
        return blob.decode("ascii")

    def summary(self) -> dict[str, Any] | None:
        """n, min, max, mean, stddev and the standard percentiles, in seconds; None if empty."""
        if not self.count:
            return None
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


def _rank(p: float, n: int) -> int:
    """Zero-based index of the nearest-rank percentile ``p`` among ``n`` sorted values."""
    # The small epsilon keeps float noise (99.9 * 1000 / 100 = 999.0000000000001) from
    # pushing an exact rank up by one, as Java's nextAfter(p, -inf) does.
    return min(n - 1, max(0, math.ceil(p * n / 100 - 1e-9) - 1))


def decode(blob: str) -> HdrHistogram:
    """Inverse of ``Histogram.encode``: merge these with ``add`` to pool runs."""
    return HdrHistogram.decode(blob.encode("ascii"))
