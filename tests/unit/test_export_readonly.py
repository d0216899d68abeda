"""`perfbench export` into a read-only run folder (issue 35, item 8): a StoreError naming the
file, not an OSError traceback. On a read-only file system both the write and the clean-up
of the temporary file fail with EROFS (Linux checks the mount before it looks the name up,
so unlinking a file that is not there fails too); both are played here, as the kernel
answers, since a test cannot mount one."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from perfbench import export
from perfbench.errors import StoreError


def _read_only(*_: object, **__: object) -> None:
    raise OSError(errno.EROFS, "Read-only file system")


def test_a_read_only_folder_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Path, "unlink", _read_only)
    target = tmp_path / "samples.csv"
    with pytest.raises(StoreError, match=r"cannot write .*samples\.csv: Read-only file system"):
        export._atomic_write(target, _read_only)
