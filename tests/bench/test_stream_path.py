"""The client's per-chunk work on a streamed reply (`make bench`): SSE parsing, the chunk's JSON,
the delta applied to the reply, the token timed. At 64 streams in flight this runs ~13,000
times a second, and a first token that arrives while it runs waits behind it.

Figures are printed by pytest-benchmark, not asserted; under plain `make test` the body runs
once and its result is checked, so the code cannot rot."""

from __future__ import annotations

import time

import orjson
from pytest_benchmark.fixture import BenchmarkFixture

from perfbench.apis.chat import ModelReply, ToolCall, json_object
from perfbench.apis.openai_chat import _apply
from perfbench.apis.sse import Parser
from perfbench.suite import Case
from perfbench.task import Task

TOKENS = 40


def frame(doc: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(doc) + b"\n\n"


def chunks() -> list[bytes]:
    """A 40-token stream as an OpenAI-compatible server sends it, one network chunk a frame."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def choice(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [frame(choice({"role": "assistant", "content": ""}))]
    out += [frame(choice({"content": "abcd"})) for _ in range(TOKENS)]
    out.append(frame(choice({}, "stop")))
    usage = {"prompt_tokens": 9, "completion_tokens": TOKENS}
    out.append(frame({**base, "choices": [], "usage": usage}))
    out.append(b"data: [DONE]\n\n")
    return out


def consume(stream: list[bytes]) -> ModelReply:
    task = Task(Case(id="c", language="en", input="hi"), "measured", 0, 0, 0, time.monotonic, 0.0)
    call = task.model_call("m")
    call.sent()
    parser, reply = Parser(), ModelReply()
    calls: dict[int, ToolCall] = {}
    text: list[str] = []
    for data in stream:
        call.arrived(time.monotonic())
        for event in parser.feed(data):
            if event.data != "[DONE]":
                _apply(reply, calls, text, call, json_object(event.data))
    reply.text = "".join(text)
    return reply


def test_per_chunk_work_of_a_40_token_stream(benchmark: BenchmarkFixture) -> None:
    stream = chunks()
    reply = benchmark(consume, stream)
    assert reply.text == "abcd" * TOKENS and reply.tokens_out == 40 and reply.finish == "stop"
