"""The recording proxy on its own (issue 24 item 1): a real aiohttp server on loopback in front
of an upstream played by httpx's mock transport. A request needs an open task's route; the
upstream gets the proxy's key, never the agent's token; the agent gets the upstream's bytes
as they were, even when perfbench cannot parse them; each model call is a step of its task."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from perfbench.apis import recording
from perfbench.apis.recording import Writer
from perfbench.http import HttpClient
from perfbench.proxy.server import ProxyServer
from perfbench.proxy.upstream import Endpoint, Upstream
from perfbench.suite import Case
from perfbench.task import Task

pytestmark = pytest.mark.anyio
KEY = "sk-upstream-secret"
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp's server, as in a run


class Upstreams:
    """The upstream: what it was sent, and what it answers."""

    def __init__(self) -> None:
        self.seen: list[httpx.Request] = []
        self.answer = httpx.Response(200, content=STREAM,
                                     headers={"content-type": "text/event-stream"})  # fmt: skip

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return self.answer


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[ProxyServer, Upstreams]]:
    upstreams = Upstreams()
    endpoint = Endpoint("http://upstream.test/v1", {"Authorization": f"Bearer {KEY}"})
    where = Upstream("a test upstream", {"openai": endpoint})
    server = ProxyServer(where, HttpClient(4, transport=httpx.MockTransport(upstreams)))
    await server.start()
    try:
        yield server, upstreams
    finally:
        await server.aclose()


def task() -> Task:
    made = Task(Case(id="c", language="en", input="hi"), "measured", 0, 0, 0,
                time.monotonic, time.monotonic())  # fmt: skip
    made.begin()
    return made


async def post(
    url: str, token: str, path: str = "v1/chat/completions", **body: Any
) -> httpx.Response:
    doc = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    async with httpx.AsyncClient() as client:
        return await client.post(f"{url}/t/{token}/{path}", json=doc,
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip


async def test_a_call_is_forwarded_with_the_proxys_key_and_timed_on_its_task(
    proxy: tuple[ProxyServer, Upstreams],
) -> None:
    server, upstreams = proxy
    t = task()
    route = server.routes.open(t)
    answer = await post(server.url, route.token, stream=True)
    assert answer.status_code == 200 and answer.content == STREAM  # the bytes, as they were
    (sent,) = upstreams.seen
    assert str(sent.url) == "http://upstream.test/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert route.token not in str(sent.headers)  # the agent's token stays with the proxy
    (step,) = t.steps
    assert (step.kind, step.status, step.tokens_in, step.tokens_out) == ("model", "ok", 9, 2)
    assert step.ttft is not None and 0 < step.ttft <= step.duration


async def test_a_request_without_an_open_route_is_refused(
    proxy: tuple[ProxyServer, Upstreams],
) -> None:
    server, upstreams = proxy
    assert (await post(server.url, "0" * 32)).status_code == 401
    route = server.routes.open(task())
    server.routes.close(route)
    refused = await post(server.url, route.token)
    assert refused.status_code == 401 and "this route is not open" in refused.text
    assert upstreams.seen == []


async def test_an_answer_perfbench_cannot_parse_still_reaches_the_agent_whole(
    proxy: tuple[ProxyServer, Upstreams],
) -> None:
    server, upstreams = proxy
    broken = STREAM.replace(b"data: [DONE]\n\n", b"") + b"data: {not json\n\n"
    upstreams.answer = httpx.Response(200, content=broken,
                                      headers={"content-type": "text/event-stream"})  # fmt: skip
    t = task()
    route = server.routes.open(t)
    answer = await post(server.url, route.token, stream=True)
    assert answer.content == broken
    assert t.steps[0].status == "error" and route.failures[0][0] == "malformed_stream"


async def test_a_refusal_is_passed_on_and_counted(proxy: tuple[ProxyServer, Upstreams]) -> None:
    server, upstreams = proxy
    upstreams.answer = httpx.Response(429, json={"error": {"message": "slow down"}},
                                      headers={"retry-after": "2"})  # fmt: skip
    t = task()
    route = server.routes.open(t)
    answer = await post(server.url, route.token)
    assert answer.status_code == 429 and answer.headers["retry-after"] == "2"
    assert "slow down" in answer.text
    assert t.throttled == 1 and t.retry_after == 2.0 and t.steps[0].status == "rate_limited"


async def test_an_api_the_upstream_does_not_serve_is_a_clear_502(
    proxy: tuple[ProxyServer, Upstreams],
) -> None:
    server, _ = proxy
    route = server.routes.open(task())
    answer = await post(server.url, route.token, path="v1/messages", max_tokens=5)
    assert answer.status_code == 502 and "serves no anthropic API" in answer.text
    assert route.failures[0][0] == "proxy_no_upstream"


async def test_a_recording_keeps_the_answer_and_its_timing_but_no_key(tmp_path: Path) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        # A hostile upstream that echoes the credential it was sent into its answer.
        said = request.headers["authorization"].replace('"', "")
        chunk = b'data: {"choices":[{"index":0,"delta":{"content":"' + said.encode() + b'"}}]}\n\n'
        return httpx.Response(200, content=chunk + STREAM,
                              headers={"content-type": "text/event-stream"})  # fmt: skip

    path = tmp_path / "calls.jsonl"
    endpoint = Endpoint("http://upstream.test/v1", {"Authorization": f"Bearer {KEY}"})
    where = Upstream("a test upstream", {"openai": endpoint})
    writer = Writer(path, {"suite": "s"}, where.secrets)
    server = ProxyServer(where, HttpClient(2, transport=httpx.MockTransport(echo)),
                         recording=writer)  # fmt: skip
    await server.start()
    try:
        t = task()
        route = server.routes.open(t)
        answer = await post(server.url, route.token, stream=True)
    finally:
        await server.aclose()
        writer.close()
    assert KEY in answer.text  # the agent got what the upstream sent, as it was
    text = path.read_text()
    assert KEY not in text and KEY[3:12] not in text and "***" in text
    header, calls = recording.read(path)
    (call,) = calls
    assert header["suite"] == "s" and (call.case, call.step, call.status) == ("c", 0, 200)
    assert call.body.endswith(b"data: [DONE]\n\n") and call.chunks[0][0] >= 0
