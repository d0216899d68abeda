"""`-t http+agent://…` over the production transport (asyncio, aiohttp) against a real
endpoint on loopback: answers, a redirect that is not followed, a server that is down."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from perfbench import store
from tests.helpers import CASES, invoke

HELD_S = 0.05


class Agent(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        task = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("location", "/run")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        time.sleep(HELD_S)
        body = json.dumps({"output": f"done {task['metadata']['iteration']}"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def agent_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Agent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run(tmp_path: Path, target: str, *extra: str) -> list[store.Sample]:
    """The run's samples; failed tasks are what some tests measure (--max-error-rate 1)."""
    out = tmp_path / "runs"
    args = ["run", str(CASES / "answer.yaml"), "-t", target, "-c", "4", "--runs", "1", *extra]
    proc = invoke(*args, "--repeat", "3", "--warmup", "0", "--out", str(out), "-q",
               "--max-error-rate", "1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [run_dir] = list(out.iterdir())
    return list(store.read_samples(run_dir))


def test_an_http_agent_is_measured_over_the_production_transport(tmp_path: Path) -> None:
    with agent_server() as host:
        done = run(tmp_path, f"http+agent://{host}/run")
    assert done and {s.status for s in done} == {"ok"} and {s.http_status for s in done} == {200}
    assert all(HELD_S <= s.latency < HELD_S + 1.0 for s in done)
    assert all(s.steps[0].wait is not None for s in done)  # the request's departure was marked


def test_a_redirect_is_an_error_not_a_second_request(tmp_path: Path) -> None:
    with agent_server() as host:
        done = run(tmp_path, f"http+agent://{host}/moved")
    assert {(s.status, s.error_kind, s.http_status) for s in done} == {("error", "http_302", 302)}


def test_an_agent_that_is_down_is_a_connect_error(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = invoke("run", str(CASES / "answer.yaml"), "-t", f"http+agent://127.0.0.1:{port}/run",
                  "--out", str(tmp_path / "first"), "-q")  # fmt: skip
    assert refused.returncode == 3 and "pre-flight: cannot connect to" in refused.stderr
    done = run(tmp_path, f"http+agent://127.0.0.1:{port}/run", "--no-preflight")
    assert {(s.status, s.error_kind) for s in done} == {("error", "connect_error")}
    assert all("cannot connect to" in (s.error or "") for s in done)
