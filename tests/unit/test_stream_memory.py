"""What a long stream holds while it is read: its text joined as it goes, its gaps packed.

A 64 MiB stream of one-character tokens (a compression bomb, up to limits.MAX_BODY) made a str
object and a float object per token: the process grew 284 MiB (tests/e2e/
test_hostile_replies.py's bomb, measured alone); with these, 130."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

from perfbench.apis import anthropic_messages, openai_chat, openai_completions
from perfbench.apis.chat import PIECES, ModelReply, ToolCall
from perfbench.apis.openai_responses import _Stream
from perfbench.apis.sse import Event
from perfbench.suite import Case
from perfbench.task import ModelCall, Task

TOKENS = 3 * PIECES + 5


def _call() -> tuple[Task, ModelCall]:
    task = Task(Case(id="c", language="en", input="hi"), "measured", 0, 0, 0, time.monotonic, 0.0)
    call = task.model_call("m")
    call.sent()
    return task, call


def _pieces(feed: Any) -> list[str]:
    """The text list one API's stream reader fills, after TOKENS one-character deltas."""
    text: list[str] = []
    _, call = _call()
    for i in range(TOKENS):
        feed(text, call, "ab"[i % 2])
    return text


def test_every_api_joins_a_long_streams_text_as_it_goes() -> None:
    def chat(text: list[str], call: ModelCall, piece: str) -> None:
        openai_chat._apply(
            ModelReply(), {}, text, call, {"choices": [{"delta": {"content": piece}}]}
        )

    def anthropic(text: list[str], call: ModelCall, piece: str) -> None:
        blocks: dict[int, ToolCall] = {}
        anthropic_messages._delta(
            {"delta": {"type": "text_delta", "text": piece}}, blocks, text, call
        )

    def completions(text: list[str], call: ModelCall, piece: str) -> None:
        openai_completions._apply({"choices": [{"text": piece}]}, ModelReply(), text, call)

    expected = "ab" * (TOKENS // 2) + "a" * (TOKENS % 2)
    for feed in (chat, anthropic, completions):
        text = _pieces(feed)
        assert len(text) <= PIECES + 1 and "".join(text) == expected, feed.__name__

    _, call = _call()
    stream = _Stream(call)
    for i in range(TOKENS):
        data = (
            f'{{"type": "response.output_text.delta", "output_index": 0, "delta": "{"ab"[i % 2]}"}}'
        )
        stream.event(Event("message", data))
    [texts] = stream.texts.values()
    assert len(texts) <= PIECES + 1 and "".join(texts) == expected


def test_a_tasks_gaps_take_eight_bytes_each() -> None:
    task, call = _call()
    call.token()
    tracemalloc.start()
    try:
        for _ in range(100_000):
            call.token()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(task._gaps) == 100_000
    assert held < 12 * 100_000  # a list of floats: 32 bytes a gap
    sample = task.sample()
    assert sample.itl_max is not None and sample.itl_gaps is not None
