"""Secrets out of error text: one rule for every target that sends them.

A server or agent may echo the request (headers included) in an error body; the text a sample
keeps must not carry the key. What counts as secret: the values of the headers perfbench sends
on the caller's behalf (and their long words, so ``sk-…`` of ``Bearer sk-…`` goes too), URL
credentials and query values."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

MASK = "***"


class Redactor:
    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        self.secrets = _secrets(url, headers)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text


def _secrets(url: str, headers: Mapping[str, str]) -> tuple[str, ...]:
    found: set[str] = set()
    for value in headers.values():
        found.add(value)
        found.update(word for word in value.split() if len(word) >= 8)
    parts = urlsplit(url)
    found.update(p for p in (parts.username, parts.password) if p)
    for pair in parts.query.split("&"):
        found.add(pair.partition("=")[2])
    # Longest first, so a value is replaced before a word inside it.
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))
