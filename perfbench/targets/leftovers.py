"""What a ``cmd:`` agent left running when its task ended: processes of its session (a child
that moved to a process group of its own) and processes holding its stdout or stderr (a
child that called ``setsid``, or a daemon): found in ``/proc`` and killed, so none outlives
its task or keeps the next task's answer from ending. Linux only; elsewhere none is found
(the agent's process group is still killed, ``command._end_group``)."""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from pathlib import Path

PROC = Path("/proc")


def pipes(pid: int) -> frozenset[str]:
    """The pipes on the process's stdout and stderr (``pipe:[inode]``, or ``socket:[inode]``
    under uvloop), read while it runs: an exited process's descriptors are gone."""
    found = set()
    for fd in (1, 2):
        with suppress(OSError):
            link = os.readlink(PROC / str(pid) / "fd" / str(fd))
            if link.startswith(("pipe:", "socket:")):  # uvloop's stdio is a socket pair
                found.add(link)
    return frozenset(found)


def kill_leftovers(session: int, held: frozenset[str], spare: int) -> int:
    """Kill every live process of ``session`` and every one holding a pipe of ``held`` (empty:
    the agent's pipes were closed, no need to look), but ``spare``; the number killed."""
    killed = 0
    for pid in _pids():
        if pid != spare and _left(pid, session, held):
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def _pids() -> list[int]:
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    own = os.getpid()
    return [int(n) for n in names if n.isdigit() and int(n) != own]


def _left(pid: int, session: int, held: frozenset[str]) -> bool:
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    if fields[0] == "Z":  # already dead, waiting for its parent
        return False
    if int(fields[3]) == session:
        return True
    return bool(held) and _holds(pid, held)


def _holds(pid: int, held: frozenset[str]) -> bool:
    fds = PROC / str(pid) / "fd"
    try:
        names = os.listdir(fds)
    except OSError:  # gone, or not ours to look at
        return False
    for name in names:
        with suppress(OSError):
            if os.readlink(fds / name) in held:
                return True
    return False
