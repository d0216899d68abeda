"""The mock server on a real loopback port, driven by the official openai and anthropic SDKs
and by plain httpx: wire formats, tool calls, usage, 429s, timing accuracy and faults."""

from __future__ import annotations

import asyncio
import itertools
import json
import select
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from perfbench.mock.profile import Profile, load_profile
from perfbench.mock.server import MockServer, serve_in_thread
from tests.helpers import load_note, mock_process

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "get_order",
        "description": "Look up an order.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    }
]
QUICK = {
    "ttft_ms": 5,
    "itl_ms": 1,
    "output_chars": 60,
    "models": {"sim": {"tokens_per_char": {"default": 0.25}}},
}


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with serve_in_thread(Profile.model_validate(QUICK)) as srv:
        yield srv


@pytest.fixture
def oai(server: MockServer) -> Iterator[openai.OpenAI]:
    # Closed after the test: an SDK client left to the garbage collector leaks its socket.
    with openai.OpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0) as client:
        yield client


@pytest.fixture
def claude(server: MockServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="sk-ant-test", base_url=server.url, max_retries=0) as client:
        yield client


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_openai_sdk_text_and_usage(oai: openai.OpenAI) -> None:
    done = oai.chat.completions.create(model="gpt-4o", messages=user("Hello there"))  # type: ignore[arg-type]
    assert done.choices[0].message.content and done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.completion_tokens == 15
    assert done.usage.prompt_tokens == 3  # 11 characters × 0.25, rounded up


def test_openai_sdk_stream_with_usage(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="gpt-4o",
        messages=user("Hello there"),
        stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text) == 60
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 15
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_openai_sdk_parses_streamed_tool_calls(oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(
        model="gpt-4o",
        messages=user("Where is A-1042?"),
        tools=TOOLS_OPENAI,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_completion()
    [call] = final.choices[0].message.tool_calls or []
    assert call.function.name == "get_order"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"order_id": "order_id-1"}  # type: ignore[union-attr]
    assert final.choices[0].finish_reason == "tool_calls"
    # After the tool result, the model answers.
    followup = oai.chat.completions.create(
        model="gpt-4o",
        messages=[
            *user("Where is A-1042?"),
            {"role": "assistant", "tool_calls": [call.model_dump()]},  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": "shipped"},
        ],
        tools=TOOLS_OPENAI,  # type: ignore[arg-type]
    )
    assert followup.choices[0].message.content


def test_anthropic_sdk_text_stream_and_tool_use(claude: anthropic.Anthropic) -> None:
    msg = claude.messages.create(model="mock-claude", max_tokens=200, messages=user("你好"))  # type: ignore[arg-type]
    assert msg.content[0].type == "text" and msg.stop_reason == "end_turn"
    assert msg.usage.output_tokens == 15
    with claude.messages.stream(
        model="mock-claude",
        max_tokens=200,
        messages=user("Where is A-1042?"),  # type: ignore[arg-type]
        tools=TOOLS_ANTHROPIC,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_message()
    [block] = final.content
    assert block.type == "tool_use" and block.name == "get_order"
    assert block.input == {"order_id": "order_id-1"}
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0
    with claude.messages.stream(model="claude", max_tokens=5, messages=user("hello")) as stream:  # type: ignore[arg-type]
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert len(text) == 20 and final.stop_reason == "max_tokens"


@pytest.fixture(scope="module")
def limited() -> Iterator[MockServer]:
    profile = Profile.model_validate({**QUICK, "rate_limits": {"requests_per_minute": 30}})
    with serve_in_thread(profile) as srv:
        yield srv


def test_sdks_raise_their_rate_limit_error_with_retry_after(limited: MockServer) -> None:
    with (
        openai.OpenAI(api_key="k", base_url=limited.url + "/v1", max_retries=0) as oai,
        anthropic.Anthropic(api_key="k", base_url=limited.url, max_retries=0) as claude,
    ):
        _refused_twice(oai, claude)
    stats = httpx.get(limited.url + "/stats").json()
    assert stats["rate_limited"] == 2


def _refused_twice(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    oai.chat.completions.create(model="m", messages=user("hi"))  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as caught:
        oai.chat.completions.create(model="m", messages=user("hi"))  # type: ignore[arg-type]
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.response.headers["x-ratelimit-limit-requests"] == "30"
    with pytest.raises(anthropic.RateLimitError) as caught_a:
        claude.messages.create(model="m", max_tokens=10, messages=user("hi"))  # type: ignore[arg-type]
    assert int(caught_a.value.response.headers["retry-after"]) >= 1
    assert caught_a.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_models_health_and_stats(server: MockServer) -> None:
    models = httpx.get(server.url + "/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == "sim"
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert httpx.get(server.url + "/nope").status_code == 404


async def _stream_timing(
    client: httpx.AsyncClient, url: str, key: str
) -> tuple[float, list[float]]:
    """TTFT from the moment the request body was sent (httpx's trace hook), so the client's
    own queueing under 16 concurrent streams is not blamed on the server."""
    body = {"model": "m", "messages": user("timing"), "stream": True}
    loop = asyncio.get_running_loop()
    sent: list[float] = []
    times: list[float] = []

    async def trace(name: str, info: dict[str, object]) -> None:
        if name == "http11.send_request_body.complete":
            sent.append(loop.time())

    headers = {"x-perfbench-key": key}
    async with client.stream(
        "POST", url, json=body, headers=headers, extensions={"trace": trace}
    ) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"role"' not in line:
                times.append(loop.time())
    return times[0] - sent[0], [b - a for a, b in itertools.pairwise(times)]


def test_ttft_and_gaps_match_the_profile_at_16_streams(tmp_path: Path) -> None:
    profile = tmp_path / "timing.yaml"
    profile.write_text(
        "ttft_ms: 50\nitl_ms: 10\noutput_chars: 80\n"
        "models: {sim: {tokens_per_char: {default: 0.25}}}\n"
    )

    async def measure(url: str) -> tuple[list[float], list[float]]:
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
        async with httpx.AsyncClient(limits=limits, timeout=10) as client:
            # Open all 16 connections first: connection setup is not the server's TTFT.
            await asyncio.gather(*(client.get(url + "/health") for _ in range(16)))
            results = []
            for round_ in range(3):  # three rounds of 16 concurrent streams, medians over all
                results += await asyncio.gather(
                    *(
                        _stream_timing(client, url + "/v1/chat/completions", f"s{round_}-{i}")
                        for i in range(16)
                    )
                )
        return [t for t, _ in results], [g for _, gaps in results for g in gaps]

    # The medians hold to 2 ms on a quiet core; a loaded machine's scheduling delay (20 ms at
    # load average 15) lands in one sitting, not in every one: measured again up to twice.
    tries: list[tuple[float, float]] = []
    with mock_process(profile) as url:
        while len(tries) < 3:
            ttfts, gaps = asyncio.run(measure(url))
            assert len(gaps) == 3 * 16 * 19
            tries.append((statistics.median(ttfts), statistics.median(gaps)))
            if abs(tries[-1][0] - 0.050) < 0.002 and abs(tries[-1][1] - 0.010) < 0.002:
                break
    ttft, gap = tries[-1]
    assert abs(ttft - 0.050) < 0.002 and abs(gap - 0.010) < 0.002, (tries, load_note())


@pytest.mark.parametrize(
    "kind", ["error_500", "error_503", "stall", "reset", "truncate", "malformed"]
)
def test_each_fault_is_visible_to_a_client(kind: str) -> None:
    profile = Profile.model_validate({**QUICK, "faults": {kind: 1.0, "stall_s": 2.0}})
    body = {"model": "m", "messages": user("hi"), "stream": True}
    with serve_in_thread(profile) as srv, httpx.Client(timeout=httpx.Timeout(5, read=0.5)) as c:
        url = srv.url + "/v1/chat/completions"
        if kind in ("error_500", "error_503"):
            r = c.post(url, json=body)
            assert r.status_code == (500 if kind == "error_500" else 503)
            assert r.json()["error"]["type"] == "server_error"
        elif kind == "stall":
            with pytest.raises(httpx.ReadTimeout):
                c.post(url, json=body)
        elif kind == "reset":
            with (
                pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
                c.stream("POST", url, json=body) as r,
            ):
                list(r.iter_lines())
        else:
            with c.stream("POST", url, json=body) as r:
                lines = [line for line in r.iter_lines() if line.startswith("data: ")]
            assert (
                lines[-1] != "data: [DONE]" if kind == "truncate" else lines[-1] == "data: [DONE]"
            )
            if kind == "malformed":
                broken = [ln for ln in lines[:-1] if not _parses(ln[6:])]
                assert len(broken) == 1
        assert c.get(srv.url + "/stats").json()["faults"][kind] >= 1


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_load_profile_default_serves_both_simulated_tokenizers() -> None:
    zh = "请帮我查一下订单什么时候到。" * 4
    with serve_in_thread(load_profile("default")) as srv:
        usage = {
            model: httpx.post(
                srv.url + "/v1/chat/completions", json={"model": model, "messages": user(zh)}
            ).json()["usage"]
            for model in ("gpt-4o", "deepseek-chat")
        }
    assert usage["gpt-4o"]["prompt_tokens"] == 40  # 56 characters × 0.7
    assert usage["deepseek-chat"]["prompt_tokens"] == 34  # × 0.6


def test_timings_record_each_keyed_requests_arrival_and_first_write() -> None:
    """`mock serve --timings`: the server's own TTFT per request, for benchmarks that take the
    server's lateness out of a client's error."""
    profile = Profile.model_validate({**QUICK, "ttft_ms": 50})
    body = {"model": "m", "messages": user("hi")}
    with serve_in_thread(profile, timings=True) as srv, httpx.Client() as client:
        url = srv.url + "/v1/chat/completions"
        client.post(url, json={**body, "stream": True}, headers={"x-perfbench-key": "k1"})
        client.post(url, json=body, headers={"x-perfbench-key": "k2"})
        client.post(url, json=body)  # no key: not recorded
        timings = client.get(srv.url + "/stats/timings").json()["timings"]
    assert set(timings) == {"k1", "k2"}
    arrival, first = timings["k1"]
    assert first - arrival >= 0.050  # the first token was not written before it was due
    arrival, first = timings["k2"]
    assert first - arrival >= 0.050  # a whole body waits out the reply's duration


def test_timings_are_off_unless_asked(server: MockServer) -> None:
    assert httpx.get(server.url + "/stats/timings").json() == {"timings": None}


@pytest.mark.skipif(not hasattr(select, "epoll"), reason="Linux's epoll")
def test_a_request_that_came_while_the_server_was_busy_counts_from_when_it_was_seen() -> None:
    """The mock's loop reads a request only at its next poll; under load that was late, and
    every due time counted from there. It checks for waiting bytes between its own steps, and a
    request seen then is timed from that check: here one while the loop was held 0.3 s."""
    profile = Profile.model_validate({**QUICK, "ttft_ms": 0})
    body = json.dumps({"model": "m", "messages": user("hi")}).encode()

    def post(key: str) -> bytes:
        return (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
            f"\r\nx-perfbench-key: {key}\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body

    def answer(conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            data += conn.recv(65536)

    with serve_in_thread(profile, timings=True) as srv:
        loop: asyncio.AbstractEventLoop = srv._runner.server._loop  # type: ignore[union-attr]
        conn = socket.create_connection((srv.host, srv.port))
        conn.sendall(post("first"))  # the connection is open and watched
        answer(conn)
        holding, sent, stamped = threading.Event(), threading.Event(), {}

        def busy() -> None:  # the server's own work, holding its loop
            holding.set()
            sent.wait(5)
            time.sleep(0.05)
            stamped["poll"] = time.monotonic()
            srv._stamps.poll()  # as between its own steps
            stamped["polled"] = time.monotonic()
            time.sleep(0.3)

        loop.call_soon_threadsafe(busy)
        holding.wait(5)  # the loop is held: it cannot read the request before the poll
        conn.sendall(post("second"))
        sent.set()
        answer(conn)
        conn.close()
        arrival, _ = httpx.get(srv.url + "/stats/timings").json()["timings"]["second"]
    assert stamped["poll"] <= arrival <= stamped["polled"]  # not 0.3 s later, when read
