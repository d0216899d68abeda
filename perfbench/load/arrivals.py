"""Open-loop arrival schedules: when each task is meant to start, in seconds from the start of
its pass. Seeded and pure, so a schedule is reproducible and testable on its own."""

from __future__ import annotations

import hashlib
import random
from typing import Literal


def schedule(
    per_second: float, kind: Literal["constant", "poisson"], count: int, seed: str
) -> list[float]:
    """``count`` intended start offsets at ``per_second`` on average. Constant: evenly spaced.
    Poisson: exponential gaps drawn from a generator seeded by ``seed`` alone."""
    if kind == "constant":
        return [i / per_second for i in range(count)]
    digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest))
    out, t = [], 0.0
    for _ in range(count):
        out.append(t)
        t += rng.expovariate(per_second)
    return out
