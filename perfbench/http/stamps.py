"""When bytes reached a socket: stamps taken between the event loop's own polls.

An event loop reads a socket only when it next polls, after every callback already queued
has run. Under load that is late: at 256 streams held 200 ms a closed loop's completions come
in waves, and one loop pass ran tens of ms of other tasks' work, so the client timed tokens up
to 50 ms after they arrived and the mock started its hold late by as much
(``tests/bench/client_figures.py --errors``). ``SocketStamps`` is a second epoll set over the
same sockets, edge-triggered, polled without blocking (~0.5 µs) between steps of perfbench's
own work (each read the loop hands a protocol, a request going out, a chunk taken up); a
socket found readable is stamped then (its handler's ``seen``), and the protocol
times its next bytes from that stamp when the loop reads them (``SocketStamps.arrived``).

Plain TCP on Linux only: elsewhere, and over TLS, bytes are timed when read."""

from __future__ import annotations

import asyncio
import contextlib
import select
import time
from typing import Any, Protocol

_BATCH = 64  # events taken per epoll call


class Stamped(Protocol):
    """A connection's protocol: ``seen`` is when its socket was found holding unread bytes."""

    seen: float | None


class SocketStamps:
    __slots__ = ("_epoll", "_handlers")

    def __init__(self) -> None:
        epoll = getattr(select, "epoll", None)
        self._epoll: Any = epoll() if epoll is not None else None
        self._handlers: dict[int, Stamped] = {}

    def watch(self, transport: asyncio.BaseTransport, handler: Stamped) -> int:
        """Watch the transport's socket for ``handler``; its fd, or -1 when not watched."""
        sock = transport.get_extra_info("socket")
        if self._epoll is None or sock is None or _is_tls(transport):
            return -1
        fd: int = sock.fileno()
        try:
            self._epoll.register(fd, select.EPOLLIN | select.EPOLLET)
        except OSError:  # closed already
            return -1
        self._handlers[fd] = handler
        return fd

    def forget(self, fd: int, handler: Stamped) -> None:
        # Only its own: a closed socket's fd may already be a new connection's, watched anew.
        if self._handlers.get(fd) is handler:
            del self._handlers[fd]
            with contextlib.suppress(OSError):  # closed first: epoll dropped it then
                self._epoll.unregister(fd)

    def poll(self) -> None:
        if not self._handlers:
            return
        # Edge-triggered: a socket is reported once per arrival, and not at all once its
        # bytes have been read, so a stamp is never older than the bytes it times. Every
        # ready socket must be taken now (one left for later would be stamped after its
        # bytes were read, timing its next ones early), so a full batch polls again; batches
        # of ``_BATCH``: Python's default asks for 1,023 events, a 12 KiB buffer per call
        # (0.71 µs a poll against 0.32).
        events = self._epoll.poll(0, _BATCH)
        if events:
            now = time.monotonic()
            handlers = self._handlers
            while True:
                for fd, _ in events:
                    handler = handlers.get(fd)
                    if handler is not None and handler.seen is None:
                        handler.seen = now
                if len(events) < _BATCH:
                    return
                events = self._epoll.poll(0, _BATCH)

    def arrived(self, handler: Stamped) -> float:
        """When the bytes the loop is handing ``handler`` now arrived (``time.monotonic``):
        its stamp if a poll saw them waiting, else now. Call once per read; it polls first,
        for the sockets the loop's pass has yet to read: they are waiting now."""
        self.poll()
        seen = handler.seen
        if seen is None:
            return time.monotonic()
        handler.seen = None
        return seen

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
        self._handlers.clear()


class StampedProtocol(asyncio.Protocol):
    """Mixin (first base) for a connection protocol whose socket ``stamps`` watches while the
    connection is open; its ``data_received`` takes ``stamps.arrived(self)``."""

    stamps: SocketStamps  # set by the class that mixes this in
    seen: float | None = None
    _fd = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._fd = self.stamps.watch(transport, self)

    def connection_lost(self, exc: BaseException | None) -> None:  # as aiohttp's protocols
        self.stamps.forget(self._fd, self)
        super().connection_lost(exc)  # type: ignore[arg-type]  # asyncio's stub: Exception


def _is_tls(transport: asyncio.BaseTransport) -> bool:
    # Under TLS a readable socket may carry no data for the protocol (a session ticket, a
    # key update): a stamp taken then would time later bytes too early.
    return any(transport.get_extra_info(key) is not None for key in ("sslcontext", "ssl_object"))
