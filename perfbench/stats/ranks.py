"""Mid-ranks, shared by the gate's rank tests (``compare.mann_whitney``, ``paired``). Pure."""

from __future__ import annotations

from collections.abc import Sequence


def midranks(values: Sequence[float]) -> list[float]:
    """Each value's rank from 1, tied values sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks
