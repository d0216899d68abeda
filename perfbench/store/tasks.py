"""A set of task keys (phase, run, case, iteration) held as one bit per task.

Reading back a run of 10^6 samples kept a Python set of 10^6 key tuples (with the samples, 1.66
GB for `run --resume`); as bits a pass of the suite's tasks costs (cases × iterations) / 8
bytes. Bit ``iteration × cases + case`` of its pass's bitmap: passes run round by round (each
case once, then each again), so a pass's bitmap stays dense. A case the run's suite does not
name (a hand-edited file) goes to a plain set beside, so the set stays exact."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

TaskKey = tuple[str, int, str, int]  # Sample.key: phase, run, case, iteration


class TaskSet(Collection[TaskKey]):
    """Task keys of a run whose suite has ``cases`` (their ids, in any fixed order)."""

    def __init__(self, cases: Iterable[str] = ()) -> None:
        self._place = {case: n for n, case in enumerate(dict.fromkeys(cases))}
        self._names = list(self._place)
        self._bits: dict[tuple[str, int], bytearray] = {}  # (phase, run) → its tasks' bits
        self._other: set[TaskKey] = set()  # keys of cases the suite does not name
        self._len = 0

    def add(self, key: TaskKey) -> bool:
        """Add ``key``; whether it was not there yet."""
        where = self._where(key)
        if where is None:
            if key in self._other:
                return False
            self._other.add(key)
        else:
            bits, byte, mask = where
            if byte >= len(bits):
                bits.extend(bytes(byte + 1 - len(bits) + len(bits) // 2))  # amortised growth
            if bits[byte] & mask:
                return False
            bits[byte] |= mask
        self._len += 1
        return True

    def __contains__(self, key: object) -> bool:
        if not (isinstance(key, tuple) and len(key) == 4):
            return False
        where = self._where(key, grow=False)
        if where is None:
            return key in self._other
        bits, byte, mask = where
        return byte < len(bits) and bool(bits[byte] & mask)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[TaskKey]:
        width = len(self._names)
        for (phase, run), bits in self._bits.items():
            for byte, value in enumerate(bits):
                for bit in range(8) if value else ():
                    if value >> bit & 1:
                        iteration, case = divmod(byte * 8 + bit, width)
                        yield phase, run, self._names[case], iteration
        yield from self._other

    def _where(
        self, key: tuple[object, ...], grow: bool = True
    ) -> tuple[bytearray, int, int] | None:
        """The bitmap, byte and bit mask of ``key``; None for a key kept in the plain set."""
        phase, run, case, iteration = key
        place = self._place.get(case) if isinstance(case, str) else None
        if place is None or not isinstance(iteration, int) or iteration < 0:
            return None
        if not isinstance(phase, str) or not isinstance(run, int):
            return None
        bits = self._bits.get((phase, run))
        if bits is None:
            bits = bytearray()
            if grow:
                self._bits[phase, run] = bits
        index = iteration * len(self._names) + place
        return bits, index >> 3, 1 << (index & 7)
