"""Lengths in tokens drawn from a distribution given by its mean and standard deviation.

Every distribution is written the same way, a mean and a spread, so one spec reads the same
whichever is picked (GuideLLM's synthetic data is written so too); draws are rounded and
clamped to ``[low, high]``, which puts the clamped share at the bounds rather than
reshaping the rest."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

Dist = Literal["constant", "uniform", "normal", "lognormal"]
DISTS: tuple[Dist, ...] = ("constant", "uniform", "normal", "lognormal")


@dataclass(frozen=True)
class Lengths:
    mean: int
    dist: Dist = "constant"
    stddev: float = 0.0
    low: int = 1
    high: int = 2**31 - 1
    # Uniform only: the range itself, when given instead of a spread.
    span: tuple[int, int] | None = None

    def draw(self, rng: random.Random) -> int:
        return min(self.high, max(self.low, round(self._value(rng))))

    def _value(self, rng: random.Random) -> float:
        if self.dist == "normal":
            return rng.gauss(self.mean, self.stddev)
        if self.dist == "lognormal":
            # The log-normal whose own mean and standard deviation are the ones asked.
            sigma2 = math.log1p((self.stddev / self.mean) ** 2)
            return rng.lognormvariate(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2))
        if self.dist == "uniform":
            low, high = self.span or self._uniform_span()
            return rng.randint(low, high)
        return self.mean

    def _uniform_span(self) -> tuple[int, int]:
        # A uniform distribution of standard deviation s is 2·√3·s wide.
        half = round(math.sqrt(3) * self.stddev)
        return max(self.low, self.mean - half), min(self.high, self.mean + half)
