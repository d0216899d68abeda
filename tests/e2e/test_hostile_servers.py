"""Servers we did not write, misbehaving on purpose on loopback, through the production stack
(asyncio, aiohttp, real sockets): a router asking a 60 s wait, garbage and huge Retry-After
values, a server that ignores `stream: true`, a gateway translating to the Anthropic format
that counts input tokens only at the end. Each gives a classified sample, never a traceback or
a stall; every run is bounded by its cases' `timeout_s`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web

from perfbench import api
from perfbench.engine.results import RunResult
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.stats.advice import advise
from tests.helpers import serving

CASE = "cases:\n  - {id: c, language: en, input: hi, timeout_s: 10}\n"


def measure(tmp_path: Path, target: str, base_url: str, **plan: int) -> RunResult:
    (tmp_path / "s.yaml").write_text(CASE)
    spec = RunSpec.build([tmp_path / "s.yaml"], TargetSpec(target, base_url=base_url),
                         Plan(runs=1, warmup=0, **plan), out=tmp_path / "runs")  # fmt: skip
    return api.run(spec, interruptible=False)


def samples(result: RunResult) -> list[dict[str, object]]:
    assert result.run_dir is not None
    lines = (result.run_dir / "samples.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize(
    ("headers", "asked"),
    [
        ({"llm_provider-retry-after": "60"}, 60.0),  # a router's default, longer than timeout_s
        ({"retry-after": "1e308"}, 1e308),  # huge
        ({"retry-after": "soon", "retry-after-ms": "-3"}, None),  # garbage: backoff instead
    ],
    ids=["router-60s", "huge", "garbage"],
)
def test_a_refusal_asking_an_unsittable_wait_ends_the_task_at_once(
    tmp_path: Path, headers: dict[str, str], asked: float | None
) -> None:
    seen: list[float] = []

    async def refuse(request: web.Request) -> web.Response:
        seen.append(asyncio.get_running_loop().time())
        return web.json_response({"error": {"message": "rpm limit"}}, status=429,
                                 headers=headers)  # fmt: skip

    with serving(refuse) as url:
        result = measure(tmp_path, "openai/m", url + "/v1")
    [s] = samples(result)
    assert s["status"] == "rate_limited" and s["retry_after"] == asked
    attempts = 1 + int(s["retries"])  # type: ignore[call-overload]
    assert attempts == len(seen)  # attempts counted are requests the server saw
    assert float(s["latency"]) < 9.0  # type: ignore[arg-type]  # never sat out to timeout_s


def test_a_server_that_ignores_stream_true_is_measured_and_named(tmp_path: Path) -> None:
    body = {"choices": [{"message": {"content": "Hi"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}  # fmt: skip

    async def whole(request: web.Request) -> web.Response:
        return web.json_response(body)

    with serving(whole) as url:
        result = measure(tmp_path, "openai/m", url + "/v1", repeat=2)
    assert [s["status"] for s in samples(result)] == ["ok", "ok"]
    assert any("stream: true" in note for note in advise(result.summary, result.meta))


def test_a_gateway_counting_anthropic_input_at_the_end_is_read(tmp_path: Path) -> None:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "model": "claude-x", "usage": {"input_tokens": 0, "output_tokens": 1}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"input_tokens": 12, "output_tokens": 4}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for name, doc in events:
            await response.write(f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode())
        await response.write_eof()
        return response

    with serving(stream) as url:
        result = measure(tmp_path, "anthropic/claude-x", url)
    [s] = samples(result)
    assert (s["status"], s["tokens_in"], s["tokens_out"]) == ("ok", 12, 4)
