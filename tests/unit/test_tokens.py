"""Golden counts for the bundled encodings: a silent change in the tokenizer package fails here.
The figures match tiktoken's own (research notes, style_libs §3.2)."""

from __future__ import annotations

import pytest

from perfbench.stats import tokens

EN = "The quick brown fox jumps over the lazy dog."
ZH = "今天天气很好，我们一起去公园散步吧。"


@pytest.mark.parametrize(
    ("text", "encoding", "expected"),
    [
        (EN, "cl100k_base", 10),
        (EN, "o200k_base", 10),
        (ZH, "cl100k_base", 22),
        (ZH, "o200k_base", 13),
        ("", "o200k_base", 0),
    ],
)
def test_golden_counts(text: str, encoding: str, expected: int) -> None:
    assert tokens.count(text, encoding) == expected


def test_encoding_follows_the_model_family() -> None:
    assert tokens.encoding_for("openai/gpt-4o-mini") == "o200k_base"
    assert tokens.encoding_for("gpt-4-turbo") == "cl100k_base"
    assert tokens.encoding_for("gpt-3.5-turbo") == "cl100k_base"
    assert tokens.encoding_for("deepseek-chat") == "o200k_base"  # a proxy, flagged as such
