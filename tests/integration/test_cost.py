"""Tokens and cost per language: priced from genai-prices at a fixed time, overridable, never
a silent $0, and every figure of the per-language table recomputed from samples.jsonl."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from perfbench import store
from perfbench.engine.session import Session
from perfbench.mock.profile import Profile
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
