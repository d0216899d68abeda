"""Hostile and garbage input, fuzzed (hypothesis, bounded): the SSE parser, the readers of
usage and retry headers, an agent's answer. Each either reads what was meant or says it cannot;
none raises anything else, and no wait it returns can stall a run."""

from __future__ import annotations

import itertools
import math
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfbench.apis.anthropic_messages import _Counts
from perfbench.apis.chat import ModelReply
from perfbench.apis.openai_common import read_usage
from perfbench.apis.retry import RetryPolicy, server_wait
from perfbench.apis.sse import Event, Parser
from perfbench.targets.agent_result import MalformedResult, parse_agent_result

BOUNDED = settings(max_examples=300, deadline=None)
NOW = datetime(2026, 12, 1, tzinfo=UTC)
RETRY_HEADERS = [
    "retry-after", "retry-after-ms", "x-ms-retry-after", "llm_provider-retry-after",
    "llm_provider-retry-after-ms", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
    "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset",
    "x-should-retry",
]  # fmt: skip
HEADER_VALUES = st.text(max_size=30) | st.integers(-5, 10**12).map(str) | st.floats().map(str)

# A JSON-ish value, the shapes a broken gateway sends where a count or an object belongs.
_scalar = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=8)
)
json_values = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)

_no_line_end = st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))
_field_text = st.text(_no_line_end, max_size=30)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])
events = st.lists(
    st.tuples(
        st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=10),
        st.lists(_field_text, min_size=1, max_size=3),
    ),
    max_size=6,
)


def _wire(sent: list[tuple[str, list[str]]], ending: str) -> bytes:
    out = []
    for name, lines in sent:
        out.append(f"event: {name}{ending}")
        out += [f"data: {line}{ending}" for line in lines]
        out.append(ending)
    return "".join(out).encode()


@BOUNDED
@given(sent=events, ending=ENDINGS, cuts=st.lists(st.integers(0, 400)))
def test_sse_reads_every_event_whatever_the_line_ends_and_chunk_cuts(
    sent: list[tuple[str, list[str]]], ending: str, cuts: list[int]
) -> None:
    body = _wire(sent, ending)
    edges = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    parser = Parser()
    got: list[Event] = []
    for a, b in itertools.pairwise(edges):
        got += parser.feed(body[a:b])
    got += parser.close()
    assert got == [Event(name, "\n".join(lines)) for name, lines in sent]


# Lines as servers send them, LF-ended: mostly one-data-line events (which a chunk's run of
# whole events splits at once), with the lines that must send it back to the line loop.
_lines = st.lists(
    st.one_of(
        _field_text.map(lambda t: f"data: {t}\n\n"),
        _field_text.map(lambda t: f"data: {t}\n"),
        _field_text.map(lambda t: f"data:{t}\n"),
        _field_text.map(lambda t: f"event: {t}\n"),
        _field_text.map(lambda t: f": {t}\n"),
        st.just("\n"),
        st.just("data: [DONE]\n\n"),
    ),
    max_size=12,
)


def _feed(parts: list[bytes]) -> list[Event]:
    parser = Parser()
    return [event for part in parts for event in parser.feed(part)] + parser.close()


@BOUNDED
@given(lines=_lines, cuts=st.lists(st.integers(0, 400)))
def test_sse_whole_events_in_one_chunk_parse_as_line_by_line(
    lines: list[str], cuts: list[int]
) -> None:
    body = "".join(lines).encode()
    edges = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    chunked = _feed([body[a:b] for a, b in itertools.pairwise(edges)])
    # One byte a chunk never holds a whole event: every line goes through the line loop.
    assert chunked == _feed([body[i : i + 1] for i in range(len(body))])


@BOUNDED
@given(chunks=st.lists(st.binary(max_size=64), max_size=12))
def test_sse_takes_any_bytes_without_raising(chunks: list[bytes]) -> None:
    parser = Parser()
    for chunk in chunks:
        for event in parser.feed(chunk):
            assert isinstance(event.data, str)
    parser.close()


@pytest.mark.slow  # make test-slow: generated header sets, each read
@BOUNDED
@given(headers=st.dictionaries(st.sampled_from(RETRY_HEADERS), HEADER_VALUES))
def test_a_garbage_retry_after_never_raises_nor_asks_a_wait_a_run_would_sit_out(
    headers: dict[str, str],
) -> None:
    asked = server_wait(headers, NOW)
    assert asked is None or asked >= 0
    policy = RetryPolicy()
    delay = policy.delay(0, asked, random.Random(0))
    # A wait is either refused (None) or bounded by --max-retry-wait, jitter included.
    assert delay is None or (math.isfinite(delay) and delay <= policy.max_wait_s * 1.2 + 1e-9)
    policy.should_retry(429, 0, headers)


@BOUNDED
@given(
    usage=st.dictionaries(
        st.sampled_from(
            [
                "prompt_tokens",
                "completion_tokens",
                "prompt_tokens_details",
                "completion_tokens_details",
                "total_tokens",
            ]
        ),
        json_values,
    )
)
def test_openai_usage_of_any_shape_gives_counts_or_none(usage: dict[str, Any]) -> None:
    reply = ModelReply()
    read_usage(usage, reply)
    for value in (reply.tokens_in, reply.tokens_out, reply.cache_read, reply.reasoning):
        assert value is None or (type(value) is int and value >= 0)


@BOUNDED
@given(
    parts=st.lists(
        st.dictionaries(
            st.sampled_from(
                [
                    "input_tokens",
                    "output_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                ]
            ),
            json_values,
        ),
        max_size=3,
    )
)
def test_anthropic_usage_of_any_shape_gives_counts_or_none(parts: list[dict[str, Any]]) -> None:
    counts, reply = _Counts(), ModelReply()
    for usage in parts:
        counts.update(usage)
    counts.into(reply)
    for value in (reply.tokens_in, reply.tokens_out, reply.cache_read, reply.cache_write):
        assert value is None or (type(value) is int and value >= 0)


@BOUNDED
@given(answer=json_values)
def test_any_agent_answer_is_read_or_refused_by_name(answer: Any) -> None:
    try:
        result = parse_agent_result(answer)
    except MalformedResult as exc:
        assert str(exc)  # says which field
        return
    assert isinstance(result.output, str)
    assert all(isinstance(name, str) for name in result.tool_calls)
