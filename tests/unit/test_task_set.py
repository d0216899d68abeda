"""store.TaskSet keeps task keys as bits: it must answer exactly as a set of the keys would,
for the suite's cases and for any other (a hand-edited samples.jsonl), and stay small."""

from __future__ import annotations

import pickle
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from perfbench.store import TaskKey, TaskSet

CASES = ["a", "b", "c"]

keys = st.tuples(
    st.sampled_from(["warmup", "measured"]),
    st.integers(0, 3),
    st.sampled_from([*CASES, "stranger"]),
    st.integers(0, 40),
)


@given(st.lists(keys, max_size=60), st.lists(keys, max_size=20))
def test_answers_as_a_set_of_the_keys_would(added: list[TaskKey], asked: list[TaskKey]) -> None:
    tasks, plain = TaskSet(CASES), set[TaskKey]()
    for key in added:
        assert tasks.add(key) == (key not in plain)  # new the first time only
        plain.add(key)
    assert len(tasks) == len(plain)
    assert set(tasks) == plain
    for key in [*added, *asked]:
        assert (key in tasks) == (key in plain)


def test_asking_does_not_add() -> None:
    tasks = TaskSet(CASES)
    assert ("measured", 0, "a", 5) not in tasks
    assert ("measured", 0, "a", 5) not in tasks
    assert len(tasks) == 0 and list(tasks) == []
    assert "not a key" not in tasks


def test_travels_to_worker_processes() -> None:
    tasks = TaskSet(CASES)
    tasks.add(("measured", 1, "b", 7))
    tasks.add(("measured", 1, "stranger", 0))
    back = pickle.loads(pickle.dumps(tasks))
    assert set(back) == set(tasks) and len(back) == 2


def _peak(n: int, cases: list[str]) -> int:
    tracemalloc.start()
    tasks = TaskSet(cases)
    for i in range(n // len(cases)):
        for case in cases:
            tasks.add(("measured", 0, case, i))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_memory_grows_with_a_bit_per_task_not_a_key() -> None:
    """100 times the tasks: a set of key tuples grows ~100-fold (12.8 MB at 10^5), the bits
    ~19-fold (1.3 kB to 25 kB: the bitmap outgrows the fixed cost of the case index)."""
    small, large = _peak(1_000, CASES), _peak(100_000, CASES)
    assert large < 30 * small, (small, large)
