"""The mock agent server: real HTTP on loopback, OpenAI- and Anthropic-compatible.

Built on aiohttp's low-level server (no router: the service routes) with uvloop where
available. aiohttp rather than uvicorn: uvicorn with a bare ASGI app served 13–19k short
requests/s against aiohttp's 10–15k on one core here, both above the 8k target, but ASGI gives
an app no hold on the connection, and the mock must reset a connection mid-stream (RST, not a
polite close) to test how clients handle it. Streams are written per due time: tokens due
together go out in one write, so a zero-latency stream is not limited by one write per token.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from perfbench.http.stamps import SocketStamps, StampedProtocol
from perfbench.mock.profile import Profile
from perfbench.mock.service import KEY_HEADER, SendPlan, Service

SPIN_S = 0.0015  # --precise: how long before a due time the server stops sleeping on a timer


class MockServer:
    def __init__(
        self,
        profile: Profile,
        *,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        timings: bool = False,
        precise: bool = False,
    ) -> None:
        self.profile, self.seed, self.host, self.port = profile, seed, host, port
        self.timings = timings
        # `mock serve --precise`: the last SPIN_S before each due time is spent yielding to the
        # loop rather than on a timer, whose millisecond granularity makes a write up to 1 ms
        # late (0.3 ms at the median here). Costs the server's CPU while anything is that close.
        self.spin = SPIN_S if precise else 0.0
        self.service: Service | None = None
        self.bound: list[str] = []  # the addresses it listens on, once started
        self._runner: web.ServerRunner | None = None
        self._stamps = SocketStamps()

    @property
    def url(self) -> str:
        return url_for(self.host, self.port)

    @property
    def exposed(self) -> list[str]:
        """The addresses it listens on beyond loopback: reachable from the network."""
        return [a for a in self.bound if not ipaddress.ip_address(a).is_loopback]

    async def start(self) -> str:
        """Bind and serve; returns the base URL (``port=0`` picks a free port)."""
        loop = asyncio.get_running_loop()
        self.service = Service(self.profile, self.seed, loop.time)
        if self.timings:
            self.service.stats.timings = {}
        server = _stamping_server(self._stamps)(self._handle, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False)
        await self._runner.setup()
        site, sockets = await self._listen(self.port)
        ports = [sock.getsockname()[1] for sock in sockets]
        if len(set(ports)) > 1:
            # Port 0 on a name of several addresses (localhost: 127.0.0.1 and ::1; "" for
            # every interface) drew a port for each, and a URL holds one: all on the first.
            await site.stop()
            site, sockets = await self._listen(ports[0])
        self.port = ports[0]
        self.bound = [sock.getsockname()[0] for sock in sockets]
        return self.url

    async def _listen(self, port: int) -> tuple[web.TCPSite, list[socket.socket]]:
        assert self._runner is not None
        site = web.TCPSite(self._runner, self.host, port, backlog=1024)
        await site.start()
        # aiohttp does not expose the bound sockets; with port 0 the kernel chose the port.
        return site, list(getattr(site._server, "sockets", None) or [])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._stamps.close()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self.service is not None
        poll = self._stamps.poll
        poll()
        # When the request's bytes reached the socket (time.monotonic, not uvloop's cached
        # millisecond loop.time()): every due time counts from there, not from this task's start.
        arrival = _take_arrival(request)
        body = await request.read()
        _take_arrival(request)  # the body's later bytes are not the next request's arrival
        # aiohttp's headers are case-insensitive already: no per-request copy.
        plan = self.service.handle(request.method, request.path, request.headers, body)
        timing = self.service.stats.time_request(request.headers.get(KEY_HEADER), arrival)
        late = self.service.stats.lateness.add
        try:
            if plan.delay:
                await _sleep_until(arrival + plan.delay, self.spin)
                poll()
                late(time.monotonic() - arrival - plan.delay)
            if plan.frames is None:
                if timing is not None:
                    timing[1] = time.monotonic()
                return await _send_body(request, plan)
            return await _send_stream(request, plan, arrival, late, timing, self.spin, poll)
        except ConnectionError:
            # The client hung up mid-response (a load tool stopping, a client timeout): normal
            # for a benchmark target, not an error to log with a traceback.
            self.service.stats.client_disconnects += 1
            return web.Response(status=499)
        finally:
            self.service.done(plan)


# A wildcard address binds every interface, but is no address to connect to (Windows refuses
# it): the URL printed for it is the loopback one of the same family.
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def url_for(host: str, port: int) -> str:
    """The base URL of a server bound to ``host`` (a wildcard address as loopback)."""
    return "http://" + netloc(_WILDCARDS.get(host, host), port)


def netloc(host: str, port: int) -> str:
    """``host:port`` as a URL writes it: an IPv6 literal in brackets (RFC 3986), its zone's
    ``%`` escaped (RFC 6874)."""
    if ":" in host:
        host = "[" + host.replace("%", "%25") + "]"
    return f"{host}:{port}"


async def _sleep_until(deadline: float, spin: float = 0.0) -> None:
    # A loop: uvloop's timers count whole milliseconds and can wake a fraction of one early,
    # which would send a reply before it is due.
    while (delay := deadline - time.monotonic()) > 0:  # noqa: ASYNC110 (a deadline, no event)
        await asyncio.sleep(0 if delay <= spin else delay - spin)


async def _send_body(request: web.BaseRequest, plan: SendPlan) -> web.StreamResponse:
    body = plan.body
    if plan.fault == "reset":
        _reset(request)
        return web.Response(status=plan.status)  # never sent: the connection is gone
    if plan.fault == "malformed":
        body = body[: len(body) // 2]
    if plan.fault == "truncate":
        # Announce the whole body, send half, close: the client sees an incomplete read.
        response = web.StreamResponse(status=plan.status, headers=plan.headers)
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        _close(request)
        return response
    return web.Response(status=plan.status, headers=plan.headers, body=body)


async def _send_stream(
    request: web.BaseRequest,
    plan: SendPlan,
    arrival: float,
    late: Callable[[float], None],
    timing: list[float] | None,
    spin: float,
    poll: Callable[[], None],
) -> web.StreamResponse:
    frames = plan.frames
    assert frames is not None
    response = web.StreamResponse(status=plan.status, headers=plan.headers)
    response.content_type = "text/event-stream"
    response.headers["cache-control"] = "no-cache"
    await response.prepare(request)
    await response.write(b"".join(frames.head))
    due, tokens = plan.due, frames.tokens
    broken_at = len(tokens) // 2 if plan.fault in ("reset", "truncate", "malformed") else -1
    i = 0
    while i < len(tokens):
        await _sleep_until(arrival + due[i], spin)
        poll()  # other connections' requests that came meanwhile: their arrival is now at most
        elapsed = time.monotonic() - arrival
        if elapsed < due[i]:  # woken early (uvloop's timers are whole milliseconds): again
            continue
        late(elapsed - due[i])
        batch = []
        while i < len(tokens) and due[i] <= elapsed:  # everything due now goes in one write
            if i == broken_at:
                if plan.fault == "malformed":
                    batch.append(frames.malformed)
                    broken_at = -1
                    i += 1
                    continue
                await response.write(b"".join(batch))
                return await _break(request, response, plan.fault)
            batch.append(tokens[i])
            i += 1
        if timing is not None and timing[1] != timing[1]:  # NaN: the first token write
            timing[1] = time.monotonic()
        if i == len(tokens):  # the last tokens, the closing events and the end: one write
            batch.extend(frames.tail)
            await response.write_eof(b"".join(batch))
            return response
        await response.write(b"".join(batch))
    await response.write_eof(b"".join(frames.tail))
    return response


async def _break(
    request: web.BaseRequest, response: web.StreamResponse, fault: str | None
) -> web.StreamResponse:
    if fault == "reset":
        _reset(request)
    else:  # truncate: the stream ends cleanly, but without its closing events
        await response.write_eof()
    return response


def _reset(request: web.BaseRequest) -> None:
    """Drop the connection with a TCP RST (SO_LINGER 0), as a crashed proxy would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _close(request: web.BaseRequest) -> None:
    if request.transport is not None:
        request.transport.close()


def _take_arrival(request: web.BaseRequest) -> float:
    take = getattr(request.protocol, "take", None)
    return time.monotonic() if take is None else float(take())


def _stamping_server(stamps: SocketStamps) -> type[web.Server]:
    """aiohttp's low-level server, whose connections note when a request's first bytes came.

    The loop reads a request only at its next poll, and the handler's task starts a pass
    later; under load, both waited behind the other streams' writes, and the mock's holds
    (and its ``--timings``) started that much late. ``stamps`` sees waiting bytes between the
    server's own steps too (a read, a handler starting, a due write)."""

    class Handler(StampedProtocol, RequestHandler):
        first: float | None = None  # when the first bytes since the last ``take`` arrived

        def data_received(self, data: bytes) -> None:
            # aiohttp calls this with no bytes to resume a paused read (as the body is read):
            # nothing arrived, and a stamp taken then would belong to the next request.
            if data:
                now = self.stamps.arrived(self)
                if self.first is None:
                    self.first = now
            super().data_received(data)

        def take(self) -> float:
            """When the bytes read since the last call began to arrive (now, if none came)."""
            first, self.first = self.first, None
            return time.monotonic() if first is None else first

    Handler.stamps = stamps

    class Server(web.Server):
        def __call__(self) -> RequestHandler:
            return Handler(self, loop=self._loop, **self._kwargs)

    return Server


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about twice the requests per second of asyncio's loop)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


@contextmanager
def serve_in_thread(
    profile: Profile,
    *,
    seed: int = 0,
    host: str = "127.0.0.1",
    port: int = 0,
    timings: bool = False,
) -> Iterator[MockServer]:
    """Run a mock server on its own event loop in a daemon thread, for tests and for driving
    it from synchronous code; stops it on exit."""
    server = MockServer(profile, seed=seed, host=host, port=port, timings=timings)
    loop = new_loop()
    ready = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=run, name="perfbench-mock", daemon=True)
    thread.start()
    ready.wait(10)
    if failure:
        raise failure[0]
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def command(profile: str, *options: str) -> list[str]:
    """The command line of ``perfbench mock serve`` in a child process of this interpreter
    (it prints its URL alone on stdout's first line): for targets, tests and benchmarks."""
    return [sys.executable, "-m", "perfbench", "mock", "serve", "--profile", profile, *options]


def stop_when_closed(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Stop ``loop`` when ``fd`` (the server's stdin) closes: a parent that spawned the server
    holds it open, so the server ends with that parent, even one killed with SIGKILL."""

    def readable() -> None:
        try:
            if os.read(fd, 4096):
                return  # nothing is expected on it; only its end matters
        except OSError:
            pass
        loop.remove_reader(fd)
        loop.stop()

    loop.add_reader(fd, readable)
