"""Hostile answers (issue 21, items 5–7): wrong JSON types and bad usage values in every place
the readers look, compression bombs, a line that never ends, a huge error page. Each makes that
task a classified sample (or a flagged usage) and the run goes on; every read is bounded.
Real sockets on loopback, the production stack (asyncio, aiohttp)."""

from __future__ import annotations

import json
import resource
import zlib
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from perfbench import api
from perfbench.engine.results import RunResult
from perfbench.http.limits import MAX_BODY, MAX_LINE
from perfbench.sample import known_kind
from perfbench.spec import Plan, RunSpec, TargetSpec
from tests.helpers import serving


def _message(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"message": {"content": "Hi", **fields}, "finish_reason": "stop"}]}


def _chunk(delta: Any, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"delta": delta, "finish_reason": None}], **extra}


# Whole replies (stream: false) and stream chunks, each wrong in one place.
WHOLE: dict[str, Any] = {
    "choices-a-string": {"choices": "abc"},
    "choices-of-numbers": {"choices": [1]},
    "message-a-list": {"choices": [{"message": [1]}]},
    "content-a-number": _message(content=5),
    "tool-calls-of-numbers": _message(tool_calls=[1]),
    "tool-name-a-number": _message(tool_calls=[{"id": "a", "function": {"name": 5}}]),
    "tool-arguments-a-list": _message(tool_calls=[{"id": "a", "function": {"name": "t",
                                                                           "arguments": [1]}}]),
    "usage-a-string": {**_message(), "usage": {"prompt_tokens": "12", "completion_tokens": "3"}},
    "usage-a-list": {**_message(), "usage": [3, 1]},
    "usage-negative": {**_message(), "usage": {"prompt_tokens": -4, "completion_tokens": -1}},
    "details-a-list": {**_message(), "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                                     "prompt_tokens_details": [1]}},
    "model-an-object": {**_message(), "model": {"name": "x"}},
    "body-a-list": [1, 2],
    "choices-nested-lists": {"choices": [[[[[[]]]]]]},
}  # fmt: skip
STREAM: dict[str, list[Any]] = {
    "choices-a-string": [{"choices": "abc"}],
    "delta-a-string": [_chunk("x")],
    "tool-calls-of-numbers": [_chunk({"tool_calls": [1]})],
    "tool-index-a-list": [_chunk({"tool_calls": [{"index": [1], "function": {"name": "t"}}]})],
    "tool-index-mixed": [_chunk({"tool_calls": [{"index": 0, "function": {"name": "t"}}]}),
                         _chunk({"tool_calls": [{"index": "a", "function": {"name": "u"}}]})],
    "tool-name-a-number": [_chunk({"tool_calls": [{"index": 0, "function": {"name": 5}}]})],
    "tool-arguments-a-number": [_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {
        "name": "t", "arguments": 7}}]})],
    "usage-a-string": [_chunk({"content": "Hi"}), {"choices": [], "usage": {"prompt_tokens": "1"}}],
    "usage-a-list": [_chunk({"content": "Hi"}), {"choices": [], "usage": [1]}],
    "finish-a-list": [{"choices": [{"delta": {"content": "Hi"}, "finish_reason": [1]}]}],
    "chunk-a-number": [5],
}  # fmt: skip
ANTHROPIC: dict[str, list[Any]] = {
    "block-a-string": [{"type": "content_block_start", "index": 0, "content_block": "x"}],
    "tool-name-a-number": [{"type": "content_block_start", "index": 0,
                            "content_block": {"type": "tool_use", "id": "a", "name": 5}}],
    "text-a-number": [{"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": 5}}],
    "json-a-number": [{"type": "content_block_start", "index": 0,
                       "content_block": {"type": "tool_use", "id": "a", "name": "t"}},
                      {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": 5}}],
    "message-a-string": [{"type": "message_start", "message": "x"}],
    "usage-a-string": [{"type": "message_start", "message": {"usage": {"input_tokens": "9"}}},
                       {"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": "Hi"}}],
    "usage-negative": [{"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": -3}}],
    "delta-a-list": [{"type": "content_block_delta", "index": 0, "delta": [1]}],
}  # fmt: skip


TIMEOUT_S = 2


def _cases(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"  - {{id: {n}, language: en, input: 'mode {n}', timeout_s: {TIMEOUT_S}, "
             "max_steps: 2}" for n in names]  # fmt: skip
    (folder / "s.yaml").write_text("cases:\n" + "\n".join(lines) + "\n")
    return folder / "s.yaml"


async def _mode(request: web.Request) -> str:
    body = await request.json()
    messages = body.get("messages") or []
    return str(messages[-1]["content"]).removeprefix("mode ") if messages else ""


def _run(folder: Path, names: list[str], target: TargetSpec) -> RunResult:
    spec = RunSpec.build([_cases(folder, names)], target, Plan(runs=1, warmup=0),
                         out=folder / "runs")  # fmt: skip
    return api.run(spec, interruptible=False)


def _samples(result: RunResult) -> dict[str, dict[str, Any]]:
    assert result.run_dir is not None
    lines = (result.run_dir / "samples.jsonl").read_text().splitlines()
    return {s["case"]: s for s in map(json.loads, lines)}


def _classified(samples: dict[str, dict[str, Any]], names: list[str]) -> None:
    assert sorted(samples) == sorted(names)  # every task kept: the run went on
    for name, s in samples.items():
        kind = s["error_kind"]
        assert kind is None or (known_kind(kind) and not kind.startswith("unhandled")), (name, s)
        if name.startswith("usage") and s["status"] == "ok":  # a bad count is never a figure
            assert s["tokens_estimated"] or s["tokens_in"] is None, (name, s)
            assert all(x is None or x >= 0 for x in (s["tokens_in"], s["tokens_out"])), s


def test_wrong_types_in_whole_replies_are_classified(tmp_path: Path) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response(WHOLE[await _mode(request)])

    with serving(answer) as url:
        result = _run(tmp_path, list(WHOLE), TargetSpec("openai/m", url + "/v1", stream=False))
    assert result.meta["status"] == "completed"
    samples = _samples(result)
    _classified(samples, list(WHOLE))
    assert samples["choices-a-string"]["error_kind"] == "malformed_stream"
    assert samples["tool-name-a-number"]["error_kind"] == "malformed_stream"
    assert samples["usage-a-string"]["status"] == "ok"


def test_wrong_types_in_stream_chunks_are_classified(tmp_path: Path) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for chunk in STREAM[await _mode(request)]:
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    with serving(answer) as url:
        result = _run(tmp_path, list(STREAM), TargetSpec("openai/m", url + "/v1"))
    assert result.meta["status"] == "completed"
    samples = _samples(result)
    _classified(samples, list(STREAM))
    assert samples["tool-calls-of-numbers"]["error_kind"] == "malformed_stream"
    assert samples["tool-name-a-number"]["error_kind"] == "malformed_stream"


def test_wrong_types_in_anthropic_events_are_classified(tmp_path: Path) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for event in ANTHROPIC[await _mode(request)] + [{"type": "message_stop"}]:
            await response.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        return response

    with serving(answer) as url:
        result = _run(tmp_path, list(ANTHROPIC), TargetSpec("anthropic/claude-x", url))
    assert result.meta["status"] == "completed"
    samples = _samples(result)
    _classified(samples, list(ANTHROPIC))
    assert samples["tool-name-a-number"]["error_kind"] == "malformed_stream"


def _gzip_of_repeats(unit: bytes, total: int) -> bytes:
    """``unit`` repeated to ``total`` bytes, gzipped, without holding the whole in memory."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = unit * (2**20 // len(unit))
    parts = [squeeze.compress(block) for _ in range(total // len(block))]
    return b"".join(parts) + squeeze.flush()


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


BOMB_DECODED = 4 * MAX_BODY  # 256 MiB decoded from a few hundred KiB


@pytest.fixture(scope="module")
def stream_bomb() -> bytes:
    return _gzip_of_repeats(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n', BOMB_DECODED)


@pytest.fixture(scope="module")
def zeros_bomb() -> bytes:
    return _gzip_of_repeats(b"\0" * 64, BOMB_DECODED)


def test_a_compression_bomb_ends_its_task_as_too_large_within_its_timeout(
    tmp_path: Path, stream_bomb: bytes, zeros_bomb: bytes
) -> None:
    async def answer(request: web.Request) -> web.Response:
        mode = await _mode(request)
        kind = "text/event-stream" if mode == "stream" else "application/json"
        status = 500 if mode == "error-page" else 200
        body = stream_bomb if mode == "stream" else zeros_bomb
        return web.Response(body=body, status=status,
                            headers={"content-type": kind, "content-encoding": "gzip"})  # fmt: skip

    names = ["stream", "whole", "error-page"]
    before = _peak_rss_mib()
    with serving(answer) as url:
        streamed = _run(tmp_path / "a", names[:1], TargetSpec("openai/m", url + "/v1"))
        whole = _run(tmp_path / "b", names[1:], TargetSpec("openai/m", url + "/v1", stream=False,
                                                            retries=0))  # fmt: skip
    samples = {**_samples(streamed), **_samples(whole)}
    # Decoding and parsing 64 MiB of events takes longer than timeout_s here: the timeout
    # fires (it could not while the loop never ran), unless the bound came first.
    assert samples["stream"]["error_kind"] in ("too_large", "timeout"), samples["stream"]
    assert samples["whole"]["error_kind"] == "too_large", samples["whole"]
    assert samples["error-page"]["error_kind"] == "http_500"  # its start read, never its all
    late = {k: s["latency"] for k, s in samples.items() if s["latency"] > TIMEOUT_S + 0.5}
    assert not late
    # Decoded whole, the bombs would have held 256 MiB at once; bounded, far less.
    assert _peak_rss_mib() - before < 200


def test_a_line_that_never_ends_is_cut_at_the_line_limit(tmp_path: Path) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: ")
        piece = b"a" * 2**16
        for _ in range(2 * MAX_LINE // len(piece)):
            await response.write(piece)
        return response

    with serving(answer) as url:
        result = _run(tmp_path, ["line"], TargetSpec("openai/m", url + "/v1"))
    [sample] = _samples(result).values()
    assert sample["error_kind"] == "too_large"
    assert "line" in sample["error"]
