"""The simulated model, its limiter and the service logic, without sockets."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from perfbench.mock import anthropic_api, openai_api
from perfbench.mock.limiter import Limiter
from perfbench.mock.profile import FAULT_KINDS, Faults, Profile, RateLimits
from perfbench.mock.service import Service
from perfbench.mock.simulator import Simulator, ToolSpec, Turn

FAULTY = Faults(
    error_500=0.05, error_503=0.04, stall=0.03, reset=0.06, truncate=0.02, malformed=0.05
)


def profile(**extra: object) -> Profile:
    base: dict[str, object] = {
        "ttft_ms": {"lognormal": {"median": 100, "p99": 400}},
        "itl_ms": {"uniform": [1, 3]},
        "output_chars": {"uniform": [40, 120]},
        "models": {
            "gpt-like": {"tokens_per_char": {"en": 0.25, "zh": 0.7}},
            "ds-like": {"tokens_per_char": {"en": 0.27, "zh": 0.55}},
        },
        "model_map": {"deepseek*": "ds-like"},
    }
    return Profile.model_validate({**base, **extra})


def called(sim: Simulator, turn: Turn) -> list[str]:
    return [c.name for c in sim.reply(turn).calls]


def test_every_fault_kind_comes_at_its_rate_over_1000_requests() -> None:
    sim = Simulator(profile(faults=FAULTY.model_dump()), seed=7)
    faults = Counter(sim.reply(Turn("m", ("hi",), key=f"r{i}")).fault for i in range(1000))
    for kind in FAULT_KINDS:
        assert abs(faults[kind] / 1000 - getattr(FAULTY, kind)) <= 0.02, (kind, faults)
    again = Simulator(profile(faults=FAULTY.model_dump()), seed=7)
    assert [again.reply(Turn("m", ("hi",), key=f"r{i}")).fault for i in range(1000)] == [
        sim.reply(Turn("m", ("hi",), key=f"r{i}")).fault for i in range(1000)
    ]
    other = Simulator(profile(faults=FAULTY.model_dump()), seed=8)
    assert [other.reply(Turn("m", ("hi",), key=f"r{i}")).fault for i in range(200)] != [
        sim.reply(Turn("m", ("hi",), key=f"r{i}")).fault for i in range(200)
    ]


def test_same_key_same_reply_whatever_the_order() -> None:
    sim = Simulator(profile(), seed=1)
    first = [sim.reply(Turn("m", ("hello",), key=k)) for k in ("a", "b", "c")]
    later = [sim.reply(Turn("m", ("hello",), key=k)) for k in ("c", "a", "b")]
    assert (first[0].ttft, first[0].pieces) == (later[1].ttft, later[1].pieces)
    assert first[0].ttft != first[1].ttft


def test_tokenizers_differ_by_model_and_language() -> None:
    sim = Simulator(profile(), seed=1)
    zh = "请帮我查一下订单什么时候到。" * 4
    gpt = sim.reply(Turn("gpt-4o", (zh,), key="k")).prompt_tokens
    ds = sim.reply(Turn("deepseek-chat", (zh,), key="k")).prompt_tokens
    assert (gpt, ds) == (40, 31)  # 56 characters × 0.7 and × 0.55, rounded up
    assert sim.reply(Turn("deepseek-chat", (zh,), key="k")).model == "ds-like"


def test_tools_are_called_in_order_then_answered() -> None:
    sim = Simulator(profile(), seed=1)
    tools = (
        ToolSpec("a", {"type": "object", "properties": {"n": {"type": "integer"}}}),
        ToolSpec("b"),
    )
    names = [called(sim, Turn("m", ("q",), tools, tool_results=i, key="k")) for i in range(3)]
    assert names == [["a"], ["b"], []]
    call = sim.reply(Turn("m", ("q",), tools, key="k"))
    assert orjson.loads(call.text) == {"n": 1} and call.finish == "tool_calls"


def test_a_scripted_plan_overrides_the_order() -> None:
    sim = Simulator(profile(plans={"c1": ["b"]}), seed=1)
    tools = (ToolSpec("a"), ToolSpec("b"))
    assert called(sim, Turn("m", ("q",), tools, key="k", case="c1")) == ["b"]
    assert called(sim, Turn("m", ("q",), tools, tool_results=1, key="k", case="c1")) == []


def test_max_tokens_cuts_the_answer() -> None:
    reply = Simulator(profile(), seed=1).reply(Turn("m", ("hi",), max_tokens=3, key="k"))
    assert (reply.completion_tokens, reply.finish) == (3, "length")


def test_limiter_requests_per_minute_with_retry_after() -> None:
    now = [0.0]
    limiter = Limiter(RateLimits(requests_per_minute=120, burst_s=1), lambda: now[0])
    assert [limiter.admit(10).admitted for _ in range(3)] == [True, True, False]
    refused = limiter.admit(10)
    assert refused.reason == "requests" and refused.retry_after == pytest.approx(0.5)
    now[0] = 0.5
    assert limiter.admit(10).admitted


def test_limiter_tokens_and_concurrency() -> None:
    now = [0.0]
    limiter = Limiter(RateLimits(tokens_per_minute=6000, concurrent=2), lambda: now[0])
    assert limiter.admit(80).admitted  # bucket of 100 tokens
    refused = limiter.admit(80)
    assert refused.reason == "tokens" and refused.retry_after == pytest.approx(0.6)
    now[0] = 10.0
    assert limiter.admit(10).admitted
    capped = limiter.admit(10)
    assert capped.reason == "concurrency"
    limiter.release()
    assert limiter.admit(10).admitted


def test_rate_headers_in_each_providers_format() -> None:
    now = [0.0]
    limiter = Limiter(RateLimits(requests_per_minute=60), lambda: now[0])
    limiter.admit(1)
    quota = limiter.admit(1)
    headers = openai_api.rate_headers(quota)
    assert headers["x-ratelimit-limit-requests"] == "60"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert (headers["retry-after"], headers["retry-after-ms"]) == ("1", "1000")
    from datetime import UTC, datetime

    anth = anthropic_api.rate_headers(quota, datetime(2026, 1, 1, tzinfo=UTC))
    assert anth["anthropic-ratelimit-requests-reset"] == "2026-01-01T00:00:01Z"


def service(**extra: object) -> Service:
    return Service(profile(**extra), seed=3, clock=lambda: 0.0)


def test_service_errors_use_each_providers_shape() -> None:
    svc = service()
    bad = svc.handle("POST", "/v1/chat/completions", {}, b"{not json")
    assert bad.status == 400 and orjson.loads(bad.body)["error"]["type"] == "invalid_request_error"
    missing = svc.handle(
        "POST", "/v1/messages", {}, b'{"messages": [{"role": "user", "content": "x"}]}'
    )
    doc = orjson.loads(missing.body)
    assert missing.status == 400 and doc["type"] == "error"
    assert (
        doc["error"]["type"] == "invalid_request_error" and "max_tokens" in doc["error"]["message"]
    )
    assert svc.handle("GET", "/nope", {}, b"").status == 404
    stats = orjson.loads(svc.handle("GET", "/stats", {}, b"").body)
    assert stats["requests"] == 4 and stats["by_status"]["400"] == 2


def test_service_rate_limits_with_429_and_counts_them() -> None:
    svc = service(rate_limits={"requests_per_minute": 60})
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    ok = svc.handle("POST", "/v1/chat/completions", {}, body)
    limited = svc.handle("POST", "/v1/chat/completions", {}, body)
    assert ok.status == 200 and limited.status == 429
    assert orjson.loads(limited.body)["error"]["code"] == "rate_limit_exceeded"
    assert limited.headers["retry-after"] == "1"
    svc.done(ok)
    assert svc.stats.rate_limited == 1 and svc.stats.in_flight == 0


def test_unkeyed_identical_requests_still_get_varied_draws() -> None:
    svc = service()
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    delays = {svc.handle("POST", "/v1/chat/completions", {}, body).delay for _ in range(5)}
    assert len(delays) == 5
    keyed = {
        svc.handle("POST", "/v1/chat/completions", {"x-perfbench-key": "k"}, body).delay
        for _ in range(3)
    }
    assert len(keyed) == 1
