"""The shipped HTTP client (the ``h1`` backend, every real run's) against the servers real LLM
endpoints answer from: uvicorn with h11 and with httptools (vLLM's and SGLang's), hypercorn,
and granian (Rust: hyper). One fault set, each server in a child process serving
asgi_app.py, plain and over TLS with a CA of the test's own (trustme): streams, chunked
bodies, keep-alive reuse, a server that closes mid-stream, 1xx, huge headers.

The rest of the suite meets this client against aiohttp, ``http.server`` and hand-written byte
servers (tests/unit/test_pool.py); these servers each frame, chunk and close in their own
way. Real sockets, real time: every exchange lasts milliseconds, bounded by its read timeout."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from perfbench.http import CallFailed, HttpClient
from perfbench.http import h1_backend as h1
from tests.conformance.asgi_app import USAGE, event
from tests.conformance.test_targets import MODEL, _check, _measure, _spec

HERE = Path(__file__).resolve().parent
SERVERS = ("uvicorn-h11", "uvicorn-httptools", "hypercorn", "granian")
START_S = 30.0  # a loaded two-core machine takes seconds to start eight interpreters
READ_S = 10.0  # the read timeout: no exchange here waits on the server that long


@dataclass(frozen=True)
class Served:
    name: str
    url: str
    tls: bool


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _command(name: str, port: int, cert: tuple[str, str] | None) -> list[str]:
    if name != "granian":
        return [sys.executable, str(HERE / "asgi_app.py"), name, str(port), *(cert or ())]
    tls = ["--ssl-certificate", cert[0], "--ssl-keyfile", cert[1]] if cert else []
    return [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1", "--no-ws", "--log-level", "warning",
            "--working-dir", str(HERE), *tls, "asgi_app:app"]  # fmt: skip


def _wait_listening(proc: subprocess.Popen[bytes], port: int, name: str) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {port} within {START_S:g} s")


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, str]]:
    """A CA of the test's own, in a PEM file, and a certificate for 127.0.0.1 it signed (its
    key in PKCS#8, the one form granian reads)."""
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())  # fmt: skip
    (folder / "key.pem").write_bytes(pkcs8)
    return folder / "ca.pem", (str(folder / "cert.pem"), str(folder / "key.pem"))


@pytest.fixture(scope="module")
def servers(authority: tuple[Path, tuple[str, str]]) -> Iterator[dict[tuple[str, bool], Served]]:
    """Every server, plain and over TLS, each in a child process, started together."""
    _, cert = authority
    started: dict[tuple[str, bool], tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for name in SERVERS:
            for tls in (False, True):
                port = _free_port()
                proc = subprocess.Popen(_command(name, port, cert if tls else None),
                                        stdout=subprocess.DEVNULL)  # fmt: skip
                started[name, tls] = proc, port
        for (name, _), (proc, port) in started.items():
            _wait_listening(proc, port, name)
        yield {
            key: Served(key[0], f"{'https' if key[1] else 'http'}://127.0.0.1:{port}", key[1])
            for key, (_, port) in started.items()
        }
    finally:
        for proc, _ in started.values():
            proc.terminate()
        for proc, _ in started.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def trusted(
    authority: tuple[Path, tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """The test's CA trusted as a user trusts theirs: SSL_CERT_FILE (OpenSSL's default paths,
    which the client's TLS context loads)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(authority[0]))
    h1._tls.cache_clear()
    yield
    h1._tls.cache_clear()


@pytest.fixture(params=[False, True], ids=["http", "https"])
def server(
    request: pytest.FixtureRequest, servers: dict[tuple[str, bool], Served], trusted: None
) -> Served:
    return servers[request.node.callspec.params["name"], request.param]


def run(body: Callable[[HttpClient], Awaitable[Any]], connections: int = 1) -> Any:
    """``body`` with an ``h1`` client on asyncio, closed after."""

    async def main() -> Any:
        client = HttpClient(connections, backend="h1")  # never httpx in its place
        try:
            return await body(client)
        finally:
            await client.aclose()

    try:
        return asyncio.run(main())
    finally:
        gc.collect()  # a connection left open warns in the test that left it


async def post(client: HttpClient, url: str, headers: dict[str, str] | None = None) -> bytes:
    async with client.post(url, b'{"q": 1}', headers or {}, READ_S, lambda: None) as r:
        assert r.status_code == 200
        return await r.aread()


pytestmark = pytest.mark.parametrize("name", SERVERS)


def test_a_stream_arrives_whole_event_by_event(server: Served, name: str) -> None:
    async def body(client: HttpClient) -> tuple[str, list[bytes]]:
        async with client.post(server.url + "/stream?n=20", b"{}", {}, READ_S, lambda: None) as r:
            return r.headers["content-type"], [chunk async for chunk in r.aiter_bytes()]

    kind, chunks = run(body)
    assert kind.startswith("text/event-stream")
    assert b"".join(chunks) == b"".join(map(event, range(20))) + b"data: [DONE]\n\n"


def test_a_chunked_body_is_read_whole(server: Served, name: str) -> None:
    assert run(lambda client: post(client, server.url + "/chunks")) == b"one two three"


def test_a_connection_is_reused_after_each_kind_of_body(server: Served, name: str) -> None:
    """Keep-alive: a length-framed body, a chunked one and a stream each leave the connection
    whole, so one connection serves every request (the server saw one client port)."""

    async def body(client: HttpClient) -> set[int]:
        ports = set()
        for path in ("/json", "/chunks", "/stream", "/json", "/stream", "/json"):
            answer = await post(client, server.url + path)
            if path == "/json":
                ports.add(json.loads(answer)["port"])
        return ports

    assert len(run(body)) == 1


def test_a_server_closing_mid_stream_is_a_dropped_connection(server: Served, name: str) -> None:
    """The application fails after three events: the client has read them, then the call
    fails as ``connection_dropped``; the next request gets a new connection that works."""
    got: list[bytes] = []

    async def body(client: HttpClient) -> tuple[CallFailed, bytes]:
        with pytest.raises(CallFailed) as failed:
            async with client.post(server.url + "/drop?n=3", b"{}", {}, READ_S, lambda: None) as r:
                async for chunk in r.aiter_bytes():
                    got.append(chunk)
        return failed.value, await post(client, server.url + "/json")

    failure, after = run(body)
    assert failure.kind == "connection_dropped", failure.message
    assert b"".join(got) == b"".join(map(event, range(3)))
    assert json.loads(after)["got"] == len(b'{"q": 1}')


def test_a_1xx_before_the_answer_is_skipped(server: Served, name: str) -> None:
    """``Expect: 100-continue``: the server answers 100 Continue, then 200; the client has
    written its body at once, and takes the 200 as the answer."""
    answer = run(lambda client: post(client, server.url + "/json", {"expect": "100-continue"}))
    assert json.loads(answer)["got"] == len(b'{"q": 1}')


def test_large_headers_are_read_and_huge_ones_fail_classified(server: Served, name: str) -> None:
    """A 6 KiB header is read as sent; one of 64 KiB, past the parser's 8 KiB a line, fails
    the call as a classified failure, not a hang nor a traceback."""

    async def body(client: HttpClient) -> tuple[str, CallFailed]:
        async with client.post(server.url + "/headers?size=6144", b"{}", {}, READ_S,
                               lambda: None) as r:  # fmt: skip
            big = r.headers["x-big"]
            await r.aread()
        with pytest.raises(CallFailed) as failed:
            await post(client, server.url + "/headers?size=65536")
        return big, failed.value

    big, failure = run(body)
    assert big == "b" * 6144
    assert failure.kind == "connection_dropped" and "not a valid HTTP response" in failure.message


def test_tls_needs_the_servers_ca_trusted(
    servers: dict[tuple[str, bool], Served], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without its CA trusted, a server with a certificate of its own is a connect error that
    says why; trusted through SSL_CERT_FILE, the same server answers."""
    url = servers[name, True].url + "/json"
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    h1._tls.cache_clear()
    try:
        with pytest.raises(CallFailed) as failed:
            run(lambda client: post(client, url))
    finally:
        h1._tls.cache_clear()
    assert failed.value.kind == "connect_error"
    assert "CERTIFICATE_VERIFY_FAILED" in failed.value.message


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_openai_compatible_server_measured_by_a_run(
    server: Served, name: str, stream: bool
) -> None:
    """A run of the ``openai/m`` target (the client, the wire format, the runner) against an
    OpenAI-compatible answer from each server: every task ok, its tokens as the usage says."""
    got = _measure(_spec("openai/m", server.url + "/v1", stream), "asyncio")
    _check(got, MODEL["none"])
    assert {s.tokens_out for s in got.values()} == {USAGE["completion_tokens"]}


def test_a_model_server_failing_mid_answer_is_a_dropped_connection(
    server: Served, name: str
) -> None:
    got = _measure(_spec("openai/m", server.url + "/fail/v1"), "asyncio")
    _check(got, MODEL["reset"])
