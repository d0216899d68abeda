"""samples.jsonl's writer: lines leave the caller's thread (an append that blocks in the file
system must not stall the event loop), keep their order, all land by close, and a failed write
is raised to the caller."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from perfbench.errors import StoreError
from perfbench.store import SampleWriter


class OffThreadFile:
    """A file that records which thread wrote and can be held blocked, like a stalled disk."""

    def __init__(self) -> None:
        self.data = b""
        self.threads: set[str] = set()
        self.release = threading.Event()
        self.writing = threading.Event()

    def write(self, data: bytes) -> int:
        self.threads.add(threading.current_thread().name)
        self.writing.set()
        assert self.release.wait(30)  # bounded: a test bug must not hang the suite
        self.data += data
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_lines_are_written_off_the_callers_thread_in_order_and_all_land_by_close(
    tmp_path: Path,
) -> None:
    writer = SampleWriter(tmp_path / "samples.jsonl")
    writer._fh.close()
    fake = OffThreadFile()
    writer._fh = fake  # type: ignore[assignment]
    writer.write_lines(b"1\n")
    assert fake.writing.wait(30)  # the writer thread is inside a write that does not return…
    for i in range(2, 6):
        writer.write_lines(f"{i}\n".encode())  # …and the caller goes on regardless
    fake.release.set()
    writer.close()
    assert fake.data == b"1\n2\n3\n4\n5\n"
    assert fake.threads == {"samples.jsonl"}


def test_a_real_file_has_every_line_after_drain(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    for i in range(1000):
        writer.write_lines(b'{"i":%d}\n' % i)
    writer.drain()
    assert path.read_bytes().splitlines() == [b'{"i":%d}' % i for i in range(1000)]
    writer.close()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failed_write_is_raised_by_the_next_write_and_by_drain(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.symlink_to("/dev/full")
    writer = SampleWriter(path)
    writer.write_lines(b"{}\n")
    with pytest.raises(StoreError, match=r"No space left on device.*--resume"):
        writer.drain()
    with pytest.raises(StoreError, match="cannot append to"):
        writer.write_lines(b"{}\n")
    writer.close()  # quiet: the failure was reported
