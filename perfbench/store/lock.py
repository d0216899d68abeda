"""One writer per run (or sweep) directory: an exclusive ``flock`` on its ``.lock`` file, held
for as long as the run is written.

Two processes taking up one interrupted run would both rewrite and append to samples.jsonl; the
second is refused instead, with who holds the directory. ``flock`` is released by the kernel
when its holder ends however it ends, a ``kill -9`` included, so a killed run never stays
locked and no stale lock needs removing by hand (the file a kill leaves is not a lock). A
holder that ends normally removes the file: a process that had opened it just before then
finds, once it holds it, that it is no longer the file at that path, and locks a new one."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from perfbench.errors import StoreError

LOCK = ".lock"


class Lock:
    """A held lock; ``release`` (idempotent) frees it and removes its file."""

    def __init__(self, fd: int | None, path: Path | None) -> None:
        self._fd, self._path = fd, path

    def release(self) -> None:
        if self._path is not None:  # while still held: nobody locks it in between
            with contextlib.suppress(OSError):
                self._path.unlink()
            self._path = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def lock(folder: Path, again: str) -> Lock:
    """Lock ``folder`` for this process, or raise a ``StoreError`` naming the process that
    holds it; ``again`` is the command to give once it is free."""
    path = folder / LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot lock {folder}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                # A file system without flock (some network mounts): one writer is then up
                # to the user, as it was before directories were locked.
                return Lock(fd, None)
            who, stop = _holder(fd)
            os.close(fd)
            raise StoreError(
                f"{folder} is being written by {who}. Wait for it to finish, or stop it "
                f"(Ctrl-C in its terminal, or {stop}) and then `{again}`"
            ) from None
        if _still_at(fd, path):
            _stamp(fd)
            return Lock(fd, path)
        os.close(fd)  # its holder finished and removed it meanwhile: lock the next one


def _still_at(fd: int, path: Path) -> bool:
    try:
        here, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def _stamp(fd: int) -> None:
    """Who holds the lock, for the message another process shows (best effort: the lock is
    what counts, not this note)."""
    note = {
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(note).encode(), 0)


def _holder(fd: int) -> tuple[str, str]:
    """Who holds the lock, and how to stop it."""
    try:
        note = json.loads(os.pread(fd, 4096, 0))
        pid = int(note["pid"])
        return f"process {pid} on {note['hostname']} (since {note['since']})", f"`kill {pid}`"
    except (OSError, ValueError, KeyError, TypeError):  # locked, not yet stamped
        return "another perfbench process", "end it"
