"""The redaction rule (http/redact.py) on the forms an echo sends a key in (issue 35, item 3):
as written, escaped, reversed, and base64 (either alphabet, any alignment inside a longer
encoded text, as ``Bearer <key>`` or HTTP Basic's ``user:<key>`` are sent)."""

from __future__ import annotations

import base64
import json

import pytest

from perfbench.http.redact import MASK, Redactor

KEY = "sk-pq-Zq8vW3nKp5Lm2Rt7Yx9Bc4Df6Gh1Jk0"


def b64(text: str, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(text.encode()).decode()


FORMS = {
    "plain": KEY,
    "json-escaped": KEY.replace("-", "\\u002d"),
    "url-encoded": KEY.replace("-", "%2D"),
    "reversed": KEY[::-1],
    "base64": b64(KEY),
    "base64 of Bearer": b64(f"Bearer {KEY}"),
    "base64 of HTTP Basic": b64(f"user:{KEY}"),
    "url-safe base64": b64(f"x{KEY}", urlsafe=True),
    "base64 of an echoed request": b64(json.dumps({"headers": {"authorization": f"Bearer {KEY}"}})),
}


def longest_run_of_the_key(text: str) -> int:
    """The longest piece of any form of the key still in ``text``: as written, reversed, or
    base64 at any alignment in either alphabet."""
    padded = ["\0" * k + KEY for k in range(3)]
    forms = [KEY, KEY[::-1]] + [b64(p, safe)[2:-2] for p in padded for safe in (False, True)]
    return max(
        (n for form in forms for n in range(len(form), 0, -1)
         for i in range(len(form) - n + 1) if form[i : i + n] in text),
        default=0,
    )  # fmt: skip


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_of_the_key_is_masked(form: str) -> None:
    text = f"echo: {FORMS[form]} (end)"
    masked = Redactor([KEY])(text)
    assert MASK in masked and masked.startswith("echo: ") and masked.endswith(" (end)")
    assert longest_run_of_the_key(masked) < 8, (form, masked)


def test_text_without_the_key_is_left_alone() -> None:
    text = "A normal answer, with base64 " + b64("nothing secret here at all") + " in it."
    assert Redactor([KEY])(text) == text
