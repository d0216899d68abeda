"""Tokens and cost per language: priced from genai-prices at a fixed time, overridable, never
a silent $0, and every figure of the per-language table recomputed from samples.jsonl."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from perfbench import store
from perfbench.engine.session import Session
from perfbench.mock.profile import Profile
from perfbench.sample import Sample
from perfbench.spec import Plan, RunSpec
from perfbench.stats.cost import load_pricer
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent

WHEN = datetime(2026, 11, 30, 12, tzinfo=UTC)


def profile(prices_as: str | None) -> Profile:
    return Profile.model_validate(
        {
            "ttft_ms": 10,
            "itl_ms": 1,
            "output_chars": 60,
            "models": {
                "sim": {
                    "prices_as": prices_as,
                    "tokens_per_char": {"en": 0.25, "es": 0.28, "zh": 0.7, "ja": 0.85},
                }
            },
        }
    )


@pytest.mark.anyio
async def test_per_language_table_is_recomputed_from_samples(
    example_suite: Suite, tmp_path: Path
) -> None:
    session = Session(
        RunSpec(plan=Plan(runs=2, warmup=0, concurrency=4), out=str(tmp_path)),
        suite=example_suite,
        target=MockAgent(profile("openai/gpt-4o")),
        pricer=load_pricer(None, WHEN),
    )
    result = await session.run()
    assert result.run_dir is not None
    meta = json.loads((result.run_dir / store.META).read_text())
    assert meta["prices"]["priced_as"] == "openai/gpt-4o" and meta["prices"]["simulated"]
    assert meta["prices"]["timestamp"] == "2026-11-30T12:00:00+00:00"
    by_lang: dict[str, list[dict]] = defaultdict(list)  # type: ignore[type-arg]
    for line in (result.run_dir / store.SAMPLES).read_text().splitlines():
        doc = json.loads(line)
        by_lang[doc["language"]].append(doc)
    table = result.summary["pooled"]["languages"]
    assert set(table) == {"en", "es", "ja", "zh"}
    for lang, samples in by_lang.items():
        row, n = table[lang], len(samples)
        chars = sum(s["input_chars"] for s in samples)
        cost = sum(s["cost"] for s in samples)
        first_in = sum(
            next(st["tokens_in"] for st in s["steps"] if st["kind"] == "model") for s in samples
        )
        assert row["tasks"] == n
        assert row["tokens_in"] == pytest.approx(sum(s["tokens_in"] for s in samples) / n)
        assert row["tokens_out"] == pytest.approx(sum(s["tokens_out"] for s in samples) / n)
        assert row["cost_per_task"] == pytest.approx(cost / n)
        assert row["cost_per_1k_chars"] == pytest.approx(1000 * cost / chars)
        assert row["tokens_per_100_chars"] == pytest.approx(100 * first_in / chars)
        # gpt-4o: $2.50 per million input tokens, $10 per million output tokens.
        for s in samples:
            assert s["cost"] == pytest.approx((2.5 * s["tokens_in"] + 10 * s["tokens_out"]) / 1e6)
    # The same question costs more tokens per character in Chinese and Japanese.
    assert table["zh"]["tokens_per_100_chars"] > 2 * table["en"]["tokens_per_100_chars"]
    # Per tag too: the three-tool workflows against the tool-free answers.
    tags = result.summary["pooled"]["tags"]
    assert {"no-tools", "tools-1", "tools-2", "tools-3"} <= set(tags)
    all_samples = [s for samples in by_lang.values() for s in samples]
    tagged = [s for s in all_samples if "tools-3" in s["tags"]]
    assert tags["tools-3"]["cost_per_task"] == pytest.approx(
        sum(s["cost"] for s in tagged) / len(tagged)
    )
    assert tags["tools-3"]["cost_per_task"] > tags["no-tools"]["cost_per_task"]


@pytest.mark.anyio
async def test_a_model_without_a_price_is_unpriced_not_free(
    example_suite: Suite, tmp_path: Path
) -> None:
    session = Session(
        RunSpec(plan=Plan(runs=1, warmup=0), out=None),
        suite=example_suite,
        target=MockAgent(profile("openai/no-such-model")),
        pricer=load_pricer(None, WHEN),
    )
    result = await session.run()
    overall = result.summary["runs"][0]["overall"]
    assert overall["cost_per_task"] is None and overall["cost_per_1k_chars"] is None
    assert overall["unpriced"] == overall["tasks"] == 16


def test_overrides_file_prices_models_genai_prices_lacks(tmp_path: Path) -> None:
    path = tmp_path / "perfbench.prices.yaml"
    path.write_text(
        "date: 2026-11-01\nprices:\n"
        "  - {model: qwen-max, provider: qwen, input_mtok: 1.6, output_mtok: 6.4}\n"
    )
    pricer = load_pricer(path, WHEN)
    assert pricer.cost("qwen/qwen-max", 1000, 500) == pytest.approx(0.0048)
    assert load_pricer(None, WHEN).cost("qwen/qwen-max", 1000, 500) is None
    assert pricer.source()["overrides_date"] == "2026-11-01"


def test_prices_depend_on_the_fixed_timestamp_not_the_clock() -> None:
    # DeepSeek's off-peak discount: the same tokens at 03:00 and 20:00 UTC price differently,
    # so a run stores its start time and prices every sample at it.
    day = load_pricer(None, datetime(2026, 11, 30, 3, tzinfo=UTC))
    night = load_pricer(None, datetime(2026, 11, 30, 20, tzinfo=UTC))
    a = day.cost("deepseek/deepseek-chat", 1_000_000, 1_000_000)
    b = night.cost("deepseek/deepseek-chat", 1_000_000, 1_000_000)
    assert a is not None and b is not None and a != b


def test_bad_overrides_file_names_file_line_and_field(tmp_path: Path) -> None:
    from perfbench.errors import PerfbenchError

    path = tmp_path / "p.yaml"
    path.write_text("date: 2026-11-01\nprices:\n  - {model: x, input_mtok: -1, output_mtok: 1}\n")
    with pytest.raises(PerfbenchError, match=r"p\.yaml:3: prices\[0\]\.input_mtok"):
        load_pricer(path, WHEN)


@pytest.mark.anyio
async def test_the_mock_model_is_chosen_in_the_target_string(
    example_suite: Suite, tmp_path: Path
) -> None:
    """`mock@deepseek-like`: the same prompts through another simulated tokenizer and price."""
    from perfbench.errors import TargetError
    from perfbench.targets.registry import resolve

    cases = tuple(c for c in example_suite.cases if c.language == "zh")
    zh = Suite(example_suite.name, cases, example_suite.sources)
    tokens: dict[str, float] = {}
    for model, priced_as in (
        ("gpt-4o-like", "openai/gpt-4o"),
        ("deepseek-like", "deepseek/deepseek-chat"),
    ):
        target = resolve(f"mock:default@{model}")
        assert target.name == f"mock:default@{model}"
        assert target.price_ref == priced_as  # type: ignore[attr-defined]
        spec = RunSpec(plan=Plan(runs=1, warmup=0), out=str(tmp_path))
        session = Session(spec, suite=zh, target=target, pricer=load_pricer(None, WHEN))
        result = await session.run()
        assert result.meta["prices"]["priced_as"] == priced_as
        assert result.summary["pooled"]["overall"]["cost_per_task"] > 0
        tokens[model] = result.summary["pooled"]["overall"]["tokens_per_100_chars"]
    # The default profile's tokenizers: 0.7 (gpt-4o-like) vs 0.6 (deepseek-like) tokens per
    # Chinese character, so the first call's input differs by that ratio within rounding.
    assert tokens["deepseek-like"] < tokens["gpt-4o-like"]
    with pytest.raises(TargetError, match="has no model 'nope'; it has: gpt-4o-like"):
        resolve("mock@nope")
    assert resolve("mock@deepseek-chat").name == "mock:default@deepseek-chat"  # model_map


# --- what the API reports beyond input and output: caches, reasoning, the served model --------

BASE = "http://gw.test/v1"


async def _priced(
    respx_mock: Any, api: str, reply: Any, model: str, *, stream: bool = False
) -> Sample:
    """One task through the agent loop and a real Session (so the recorder prices it)."""
    import httpx

    from perfbench.apis.anthropic_messages import AnthropicMessages
    from perfbench.apis.openai_chat import OpenAIChat
    from perfbench.engine.observer import RunObserver
    from perfbench.suite import Case
    from perfbench.targets.agent_loop import ModelAgent

    path = "/messages" if api == "anthropic" else "/chat/completions"
    respx_mock.post(BASE + path).mock(return_value=reply if isinstance(reply, httpx.Response)
                                      else httpx.Response(200, json=reply))  # fmt: skip
    wire = AnthropicMessages(model) if api == "anthropic" else OpenAIChat(model)
    agent = ModelAgent(wire, BASE, name=f"{api}/{model}", stream=stream, key="k")
    got: list[Sample] = []

    class Keep(RunObserver):
        def sample(self, sample: Sample) -> None:
            got.append(sample)

    suite = Suite.of("s", [Case(id="c", language="en", input="hi")])
    spec = RunSpec(plan=Plan(runs=1, warmup=0), out=None)
    pricer = load_pricer(None, WHEN, default=False)
    await Session(spec, Keep(), suite=suite, target=agent, pricer=pricer).run()
    [sample] = got
    return sample


def _usd(model: str, provider: str, **usage: int) -> float:
    from genai_prices import Usage, calc_price

    found = calc_price(Usage(**usage), model, provider_id=provider, genai_request_timestamp=WHEN)
    return float(found.total_price)


@pytest.mark.anyio
async def test_anthropic_input_read_from_message_delta_and_cache_tokens_priced(
    respx_mock: Any,
) -> None:
    """Gateways that translate to the Anthropic format send `input_tokens: 0` in message_start
    and the count in message_delta: `tok in 0` on every task, cost understated. The cache's
    tokens are input too, and priced at their own rates."""
    from tests.integration.test_model_clients import an, an_text, streamed

    start = an("message_start", message={"model": "claude-sonnet-4-5", "usage": {
        "input_tokens": 0, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20,
        "output_tokens": 1}})  # fmt: skip
    body = streamed([(0, start), (0.05, an_text(0, "Hi")),
                     (0, an("message_delta", delta={"stop_reason": "end_turn"},
                            usage={"input_tokens": 5, "output_tokens": 7})),
                     (0, an("message_stop"))])  # fmt: skip
    s = await _priced(respx_mock, "anthropic", body, "claude-sonnet-4-5", stream=True)
    assert (s.tokens_in, s.tokens_out) == (125, 7)  # 5 + 100 read + 20 written
    assert (s.tokens_cache_read, s.tokens_cache_write) == (100, 20)
    expected = _usd("claude-sonnet-4-5", "anthropic", input_tokens=125, output_tokens=7,
                    cache_read_tokens=100, cache_write_tokens=20)  # fmt: skip
    assert s.cost == pytest.approx(expected)
    assert s.cost < _usd("claude-sonnet-4-5", "anthropic", input_tokens=125, output_tokens=7)


@pytest.mark.anyio
async def test_openai_cached_and_reasoning_tokens_are_recorded(respx_mock: Any) -> None:
    choices = [{"message": {"content": "ok"}, "finish_reason": "stop"}]
    reply = {"model": "o4-mini", "choices": choices,
             "usage": {"prompt_tokens": 50, "completion_tokens": 9,
                       "prompt_tokens_details": {"cached_tokens": 40},
                       "completion_tokens_details": {"reasoning_tokens": 3}}}  # fmt: skip
    s = await _priced(respx_mock, "openai", reply, "o4-mini")
    assert (s.tokens_in, s.tokens_out, s.tokens_cache_read, s.tokens_reasoning) == (50, 9, 40, 3)
    assert s.model_served is None  # the model asked answered
    expected = _usd("o4-mini", "openai", input_tokens=50, output_tokens=9, cache_read_tokens=40)
    assert s.cost == pytest.approx(expected)


@pytest.mark.anyio
async def test_the_model_that_answered_is_priced_and_a_gateways_cost_kept(
    respx_mock: Any,
) -> None:
    """A router answering `gpt-4o` with `gpt-4o-mini` was priced as gpt-4o."""
    import httpx

    reply = {"model": "gpt-4o-mini", "choices": [{"message": {"content": "ok"}}],
             "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}  # fmt: skip
    answer = httpx.Response(200, json=reply, headers={"x-litellm-response-cost": "0.00021"})
    s = await _priced(respx_mock, "openai", answer, "gpt-4o")
    assert s.model_served == "gpt-4o-mini"
    mini = _usd("gpt-4o-mini", "openai", input_tokens=1000, output_tokens=100)
    assert s.cost == pytest.approx(mini) and mini < _usd("gpt-4o", "openai", input_tokens=1000,
                                                          output_tokens=100)  # fmt: skip
    assert s.cost_reported == pytest.approx(0.00021)
