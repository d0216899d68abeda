"""What a model call's reply says about usage, whichever API carried it: the tokens counted
offline when the API reported none, cache and reasoning tokens, the model that answered, and
a gateway's own cost. The built-in agent loop and the proxy both record a reply with these,
so a step means the same whoever made the call."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from perfbench.apis.chat import ModelReply
from perfbench.sample import Step
from perfbench.stats import tokens
from perfbench.task import Task


def estimate_tokens(task: Task, reply: ModelReply, body: dict[str, Any]) -> None:
    """A reply without usage: its tokens counted offline (the encoding the model's name
    suggests), and the task marked as estimated."""
    encoding = tokens.encoding_for(str(body.get("model", "")))
    reply.tokens_out = tokens.count(output_text(reply), encoding)
    if reply.tokens_in is None:
        # The conversation as sent: Chat's messages, Responses' input, or a completion's
        # prompt.
        sent = body.get("messages", body.get("input", body.get("prompt", [])))
        prompt = sent if isinstance(sent, str) else orjson.dumps(sent).decode()
        reply.tokens_in = tokens.count(prompt, encoding)
    task.tokens_estimated = True
    task.tokenizer = encoding


def record_details(task: Task, step: Step, reply: ModelReply, asked: str) -> None:
    """What a reply says beyond its counts: why it ended, cache and reasoning tokens, and the
    model that answered when it is not the one asked; on its ``step`` (the call's own, for its
    OpenTelemetry span), the tokens also summed over the task's calls."""
    step.finish = reply.finish
    step.tokens_cache_read = reply.cache_read
    step.tokens_cache_write = reply.cache_write
    step.tokens_reasoning = reply.reasoning
    if reply.cache_read is not None:
        task.tokens_cache_read = (task.tokens_cache_read or 0) + reply.cache_read
    if reply.cache_write is not None:
        task.tokens_cache_write = (task.tokens_cache_write or 0) + reply.cache_write
    if reply.reasoning is not None:
        task.tokens_reasoning = (task.tokens_reasoning or 0) + reply.reasoning
    if reply.model and reply.model != asked:
        task.model_served = step.model_served = reply.model


def reported_cost(headers: Mapping[str, str]) -> float | None:
    """A gateway's own cost of the call (LiteLLM's ``x-litellm-response-cost``), in USD."""
    text = headers.get("x-litellm-response-cost")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def output_text(reply: ModelReply) -> str:
    return reply.text + "".join(c.name + c.arguments for c in reply.tool_calls)
