"""samples.jsonl is written in batches (issue 26): a finished sample waits in memory at most
``FLUSH_S`` (or until ``BATCH_BYTES`` are pending), never longer, so a kill -9 loses at most
that; one write per batch. Under virtual time (trio's MockClock)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from trio.testing import MockClock

from perfbench.store import SAMPLES, SampleWriter
from perfbench.store.files import BATCH_BYTES, FLUSH_S

LINE = b'{"case":"c"}\n'


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
@pytest.mark.anyio
async def test_a_finished_sample_is_on_disk_within_the_flush_interval(tmp_path: Path) -> None:
    path = tmp_path / SAMPLES
    writer = SampleWriter(path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.flush_every)
        writer.write_lines(LINE)
        await anyio.sleep(FLUSH_S * 0.9)
        assert _lines(path) == 0  # batched: not one write per sample
        await anyio.sleep(FLUSH_S * 0.2)
        assert _lines(path) == 1  # never later than FLUSH_S
        writer.write_lines(LINE * 3)
        await anyio.sleep(FLUSH_S * 1.1)
        assert _lines(path) == 4
        tg.cancel_scope.cancel()
    writer.close()


def test_a_full_batch_is_written_at_once_and_close_writes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / SAMPLES
    writer = SampleWriter(path)
    count = BATCH_BYTES // len(LINE) + 1
    for _ in range(count):
        writer.write_lines(LINE)
    assert _lines(path) == count  # the batch filled: written without waiting
    writer.write_lines(LINE)
    assert _lines(path) == count
    writer.close()
    assert _lines(path) == count + 1
