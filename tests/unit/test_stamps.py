"""SocketStamps: when a socket was first seen holding unread bytes, between loop polls."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from typing import Any

import pytest

from perfbench.http.stamps import SocketStamps

pytestmark = pytest.mark.skipif(not hasattr(select, "epoll"), reason="Linux's epoll")


class _Watched:
    seen: float | None = None


class _Transport(asyncio.BaseTransport):
    def __init__(self, sock: socket.socket, tls: bool = False) -> None:
        super().__init__()
        self._extra = {"socket": sock, "sslcontext": object() if tls else None}

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self._extra.get(name, default)


def test_unread_bytes_are_stamped_once_and_bytes_already_read_never() -> None:
    stamps = SocketStamps()
    ours, theirs = socket.socketpair()
    handler = _Watched()
    try:
        assert stamps.watch(_Transport(ours), handler) == ours.fileno()
        stamps.poll()
        assert handler.seen is None  # nothing arrived yet
        theirs.sendall(b"a")
        before = time.monotonic()
        stamps.poll()
        stamp = handler.seen
        assert stamp is not None and before <= stamp <= time.monotonic()
        theirs.sendall(b"b")
        stamps.poll()
        assert handler.seen == stamp  # the earliest unread bytes keep their stamp
        # The loop reads them (and the handler takes its stamp); more come and are read before
        # the next poll: that poll must not stamp bytes that are gone.
        assert ours.recv(10) == b"ab"
        handler.seen = None
        theirs.sendall(b"c")
        assert ours.recv(10) == b"c"
        stamps.poll()
        assert handler.seen is None
    finally:
        stamps.close()
        ours.close()
        theirs.close()


def test_stamps_leave_tls_alone_and_a_reused_fd_to_its_new_connection() -> None:
    stamps = SocketStamps()
    ours, theirs = socket.socketpair()
    try:
        # Under TLS a readable socket need not hold bytes for the protocol: never stamped.
        assert stamps.watch(_Transport(ours, tls=True), _Watched()) == -1
        new = _Watched()
        fd = stamps.watch(_Transport(ours), new)
        stamps.forget(fd, _Watched())  # an old connection that had the same fd
        theirs.sendall(b"x")
        stamps.poll()
        assert new.seen is not None
        stamps.forget(fd, new)
        new.seen = None
        theirs.sendall(b"y")
        stamps.poll()
        assert new.seen is None
    finally:
        stamps.close()
        ours.close()
        theirs.close()


def test_a_read_takes_the_stamp_once_and_is_timed_now_without_one() -> None:
    stamps, handler = SocketStamps(), _Watched()
    handler.seen = 12.5
    assert stamps.arrived(handler) == 12.5
    assert handler.seen is None
    before = time.monotonic()
    assert before <= stamps.arrived(handler) <= time.monotonic()
    stamps.close()


def test_a_read_stamps_the_other_sockets_with_bytes_waiting() -> None:
    """Each read the loop hands a protocol is a moment perfbench runs: the sockets the loop's
    pass has yet to read are stamped then, not when the pass reaches them."""
    stamps = SocketStamps()
    (a, a_peer), (b, b_peer) = socket.socketpair(), socket.socketpair()
    reading, waiting = _Watched(), _Watched()
    try:
        stamps.watch(_Transport(a), reading)
        stamps.watch(_Transport(b), waiting)
        b_peer.sendall(b"x")
        before = time.monotonic()
        stamps.arrived(reading)
        assert waiting.seen is not None and before <= waiting.seen <= time.monotonic()
    finally:
        stamps.close()
        for sock in (a, a_peer, b, b_peer):
            sock.close()


def test_the_mocks_reads_with_no_bytes_leave_the_next_requests_stamp_alone() -> None:
    """aiohttp's server calls ``data_received(b"")`` to resume a paused read while a body is
    read: nothing arrived. Taken then, the stamp of bytes already waiting would be spent, and the
    next request timed from when the loop got round to reading it."""
    from aiohttp import web

    from perfbench.mock.server import _stamping_server

    async def reply(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    async def handler_of(stamps: SocketStamps) -> Any:  # aiohttp's server wants a loop
        return _stamping_server(stamps)(reply)()

    stamps = SocketStamps()
    ours, theirs = socket.socketpair()
    try:
        handler = asyncio.run(handler_of(stamps))
        stamps.watch(_Transport(ours), handler)
        theirs.sendall(b"POST / HTTP/1.1\r\n")  # the next request, not read yet
        stamps.poll()
        waiting = handler.seen
        assert waiting is not None
        handler.data_received(b"")
        assert handler.first is None
        time.sleep(0.01)
        handler.data_received(ours.recv(100))
        assert handler.take() == waiting
    finally:
        stamps.close()
        ours.close()
        theirs.close()


def test_one_poll_stamps_every_ready_socket_however_many() -> None:
    # epoll is asked for 64 events at a time (the default buffer of 1,023 cost twice the
    # poll): a ready socket left for a later poll would be stamped after the loop read its
    # bytes, timing its next bytes early, so a full batch is polled again at once.
    stamps = SocketStamps()
    pairs = [socket.socketpair() for _ in range(150)]
    handlers = [_Watched() for _ in pairs]
    try:
        for (ours, theirs), handler in zip(pairs, handlers, strict=True):
            stamps.watch(_Transport(ours), handler)
            theirs.sendall(b"x")
        stamps.poll()
        assert all(h.seen is not None for h in handlers)
    finally:
        stamps.close()
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
