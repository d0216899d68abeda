"""Which language a text is in, from its script: kana → ja, Hangul → ko, Han → zh, else en.

Kana is checked before Han because Japanese mixes both. Scripts are matched with code-point
ranges in compiled regular expressions, so this is cheap enough for the mock server to run on
every request."""

from __future__ import annotations

import re

_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")


def detect_language(text: str) -> str:
    if _KANA.search(text):
        return "ja"
    if _HANGUL.search(text):
        return "ko"
    if _HAN.search(text):
        return "zh"
    return "en"
