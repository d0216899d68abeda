"""A hostile agent against the recording proxy (issue 35, items 1–3): a ``cmd:`` agent, and
one started by hand against ``perfbench proxy``, try every way out of the route's API
(``..`` plain and encoded, absolute-form URIs, a forged Host, spoofed credentials, other
methods) while the upstream echoes the real key back (plain, reversed, base64). They show:
no request outside the base path reaches the upstream, and every one that does carries the
upstream's key, not the agent's; the agent's environment holds no upstream key (not under
its own name, a header's ``${VARIABLE}`` or another name); no file perfbench writes holds
it. Real executable, real sockets, loopback only, bounded in tasks and time."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from perfbench.proxy.forward import API_PATHS
from tests.helpers import cli, perfbench, run_samples, serving, write_suite

KEY = "sk-up-Hq7vW2nKp9Lm4Rt6Yx3Bc8Df5Gh0Jk1"  # the upstream's real key
GATEWAY = "gw-Zt4Xc9Vb2Nm7Qw1Er8Ty5Ui3Op6As0Df"  # a gateway token named by a --header
AGENT = Path(__file__).resolve().parent.parent / "fixtures" / "agents" / "hostile_agent.py"
REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "echo: {auth}"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}  # fmt: skip


class Upstream:
    """A loopback model API that keeps every request it gets (raw path and headers) and
    echoes the credentials it was sent in its answer, as a debugging server would."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.seen.append((request.method, request.raw_path, headers))
        auth = request.headers.get("Authorization", "")
        encoded = base64.b64encode(auth.encode()).decode()  # a debug echo, HTTP Basic style
        echoed = f"{auth} {request.headers.get('X-Gw')} {encoded} {auth[::-1]}"
        reply = json.loads(json.dumps(REPLY).replace("{auth}", echoed))
        return web.json_response(reply)


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, str]]:
    server = Upstream()
    with serving(server.handle) as url:
        yield server, url


def hostile_env(dump: Path) -> dict[str, str]:
    """perfbench's environment: the key under the variable --api-key-env names, the gateway
    token under a header's variable, and the key again under an innocent name."""
    dump.mkdir()
    return {**os.environ, "UPSTREAM_PROVIDER": KEY, "GW_TOKEN": GATEWAY,
            "SOME_SETTING": f"x{KEY}x", "HOSTILE_DUMP": str(dump)}  # fmt: skip


def upstream_flags(url: str) -> list[str]:
    return ["--upstream", "openai/m", "--base-url", f"{url}/v1",
            "--api-key-env", "UPSTREAM_PROVIDER", "-H", "X-Gw: ${GW_TOKEN}"]  # fmt: skip


def reports(dump: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(dump.iterdir())]


def assert_only_api_paths_went_upstream(server: Upstream, honest: int) -> None:
    """Every request the upstream got is an honest call: an API path under the base URL,
    with the real key and none of the agent's credentials."""
    assert len(server.seen) == honest, [s[:2] for s in server.seen]
    for method, path, headers in server.seen:
        assert method == "POST" and path.removeprefix("/v1/") in API_PATHS, path
        assert headers["authorization"] == f"Bearer {KEY}" and headers["x-gw"] == GATEWAY
        assert "x-api-key" not in headers and "cookie" not in headers


def assert_every_attempt_refused(report: dict[str, Any]) -> None:
    assert report["honest"] == 200
    refused = {status for _, _, status in report["attempts"]}
    assert refused <= {400, 404, 405}, report["attempts"]


def holding_the_key(folder: Path) -> list[Path]:
    """Files under ``folder`` holding a run of 8 characters of a secret (as written,
    reversed or base64-encoded)."""
    encoded = [base64.b64encode(b"\0" * k + KEY.encode()).decode()[2:-2] for k in range(3)]
    forms = (KEY, GATEWAY, KEY[::-1], *encoded)
    grams = {s[i : i + 8] for s in forms for i in range(len(s) - 7)}
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode(errors="replace")
            if any(g in text for g in grams):
                found.append(path)
    return found


def test_a_cmd_agent_reaches_nothing_but_the_api_and_never_sees_the_key(
    tmp_path: Path, upstream: tuple[Upstream, str]
) -> None:
    server, url = upstream
    env = hostile_env(tmp_path / "dump")
    cases = write_suite(tmp_path / "c.yaml", "cases:\n  - {id: a, input: hi, timeout_s: 60}\n"
                        "  - {id: b, input: ho, timeout_s: 60}\n")  # fmt: skip
    out = tmp_path / "out"
    done = cli("run", str(cases), "-t", f"cmd:{sys.executable} {AGENT}", "--runs", "1",
               "--warmup", "0", "-q", "--out", str(out), "--record", str(out / "rec.jsonl"),
               *upstream_flags(url), env=env)  # fmt: skip
    found = reports(tmp_path / "dump")
    assert len(found) == 2, done.stderr
    for report in found:
        assert_every_attempt_refused(report)
        environ = report["environ"]
        assert not {"UPSTREAM_PROVIDER", "GW_TOKEN", "SOME_SETTING"} & set(environ)
        assert not [n for n, v in environ.items() if KEY in v or GATEWAY in v]
        assert environ["OPENAI_API_KEY"] != KEY and environ["HOSTILE_DUMP"]  # the rest stays
    assert_only_api_paths_went_upstream(server, honest=2)
    samples = run_samples(out)
    assert [s["error_kind"] for s in samples] == ["proxy_refused"] * 2  # classified
    assert all("not a model API route" in s["error"] for s in samples)
    assert (out / "rec.jsonl").exists() and not holding_the_key(tmp_path / "out")
    assert KEY not in done.stdout + done.stderr


def test_perfbench_proxy_forwards_nothing_but_the_api(
    tmp_path: Path, upstream: tuple[Upstream, str]
) -> None:
    server, url = upstream
    env = hostile_env(tmp_path / "dump")
    with subprocess.Popen(perfbench("proxy", *upstream_flags(url)), env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proxy:  # fmt: skip
        try:
            assert proxy.stdout is not None
            base = proxy.stdout.readline().strip().removesuffix("/v1")  # the route
            token = base.rsplit("/", 1)[1]
            agent_env = {**env, "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": token}
            agent = subprocess.run([sys.executable, str(AGENT)], input="hi", env=agent_env,
                                   capture_output=True, text=True, timeout=60)  # fmt: skip
            assert agent.returncode == 0, agent.stderr
        finally:
            proxy.send_signal(signal.SIGINT)
            _, said = proxy.communicate(timeout=20)
    (report,) = reports(tmp_path / "dump")
    assert_every_attempt_refused(report)
    assert_only_api_paths_went_upstream(server, honest=1)
    assert "Traceback" not in said and KEY not in said


def _hang_up(base: str, sent: bytes) -> None:
    """A request whose body promises 1,000 bytes, cut after ``sent``: the agent hangs up."""
    where = urlsplit(base)
    assert where.hostname and where.port
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.sendall(f"POST {where.path}/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n".encode()
                     + sent)  # fmt: skip
        time.sleep(0.2)


def test_an_agent_hanging_up_mid_request_leaves_no_traceback(tmp_path: Path) -> None:
    env = hostile_env(tmp_path / "dump")
    with subprocess.Popen(perfbench("proxy"), env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proxy:  # fmt: skip
        try:
            assert proxy.stdout is not None
            base = proxy.stdout.readline().strip().removesuffix("/v1")  # the route
            for sent in (b'{"model": "m"', b""):
                _hang_up(base, sent)
            token = base.rsplit("/", 1)[1]
            agent_env = {**env, "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": token}
            agent = subprocess.run([sys.executable, str(AGENT)], input="hi", env=agent_env,
                                   capture_output=True, text=True, timeout=60)  # fmt: skip
            assert agent.returncode == 0, agent.stderr  # it still serves
        finally:
            proxy.send_signal(signal.SIGINT)
            _, said = proxy.communicate(timeout=20)
    assert "Traceback" not in said and "Error handling request" not in said, said
