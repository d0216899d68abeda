"""Secrets out of every text a sample keeps: one rule, for every target.

A server or agent may echo the request (headers included) in an error body, an SSE error
event, a 200 body quoted in an error, even a model's name; none of it may carry a key into a
run directory, a report or the console. The rule: any run of ``GRAM`` (5) or more characters of
a secret is masked, in its plain form or escaped (JSON ``\\u002d``, ``\\x2d``, URL ``%2D``, a
backslash escape), reversed, or base64-encoded (standard or URL-safe, alone or inside a longer
encoded text: ``Bearer <key>``, HTTP Basic's ``user:<key>``), so an escaped copy, a debug echo,
a suffix or a prefix cut off by an excerpt goes too. Not covered: other encodings (hex, a
hash, gzip) and a key split by other text.

What counts as secret: the values of the headers perfbench sends on the caller's behalf (and
their long words, so the ``sk-…`` of ``Bearer sk-…`` goes too), URL credentials and query
values, and the values of environment variables named like credentials (``…_API_KEY``,
``…TOKEN``, ``…SECRET``, ``…PASSWORD``), which an agent or SDK may have read for itself."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

MASK = "***"
GRAM = 5  # a run this long of a secret is masked; shorter runs are too common to mean it
_SHORTEST = 4  # shorter values (a one-letter password) cannot be masked without masking prose
_LONG = 8  # from this length a secret is masked by its runs, not only whole
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|%([0-9a-fA-F]{2})|\\(.)", re.DOTALL)


class Redactor:
    """Masks ``secrets`` in text (see the module's rule). Built once per target or run."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        found = {s for s in secrets if len(s) >= _SHORTEST}
        found |= {form for s in found if len(s) >= _LONG for form in _encoded(s)}
        # Longest first, so a value is replaced before a word inside it.
        self.secrets = tuple(sorted(found, key=len, reverse=True))
        self._short = tuple(s for s in self.secrets if len(s) < _LONG)
        self._grams = frozenset(
            s[i : i + GRAM] for s in self.secrets if len(s) >= _LONG for i in range(len(s) - 4)
        )

    @classmethod
    def of_request(cls, url: str, headers: Mapping[str, str]) -> Redactor:
        """The secrets of requests to ``url`` with ``headers``."""
        return cls(request_secrets(url, headers))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __call__(self, text: str) -> str:
        for secret in self._short:
            text = text.replace(secret, MASK)
        if not self._grams or len(text) < GRAM:
            return text
        return _mask_runs(text, self._grams)


def _encoded(secret: str) -> set[str]:
    """What an echo may send of ``secret`` besides its text: reversed, and base64 (standard
    and URL-safe alphabets) at each of the three alignments it can have inside a longer
    encoded text, so ``Bearer <key>``, HTTP Basic's ``user:<key>`` or a whole request
    encoded are caught too. Only the characters that encode the secret's bytes alone are
    kept (those at the edges mix in its neighbours')."""
    data = secret.encode()
    forms = {secret[::-1]}
    for shift in range(3):
        start, end = (8 * shift + 5) // 6, 8 * (shift + len(data)) // 6
        padded = b"\0" * shift + data
        forms.add(base64.b64encode(padded).decode("ascii")[start:end])
        forms.add(base64.urlsafe_b64encode(padded).decode("ascii")[start:end])
    return forms


def _mask_runs(text: str, grams: frozenset[str]) -> str:
    plain, starts = _decoded(text)
    # Most texts hold no secret: one set built in C says so (half the cost of a loop).
    if grams.isdisjoint({plain[i : i + GRAM] for i in range(len(plain) - GRAM + 1)}):
        return text
    covered = bytearray(len(plain))
    for i in range(len(plain) - GRAM + 1):
        if plain[i : i + GRAM] in grams:
            covered[i : i + GRAM] = b"\x01" * GRAM
    out: list[str] = []
    i = 0
    while i < len(plain):
        j = i
        while j < len(plain) and covered[j] == covered[i]:
            j += 1
        out.append(MASK if covered[i] else text[starts[i] : starts[j]])
        i = j
    return "".join(out)


def _decoded(text: str) -> tuple[str, list[int]]:
    """``text`` with its escapes decoded, and where in ``text`` each decoded character starts
    (one more entry: the end), so a masked run maps back onto the text as written."""
    if "\\" not in text and "%" not in text:
        return text, list(range(len(text) + 1))
    chars: list[str] = []
    starts: list[int] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        chars.extend(text[pos : m.start()])
        starts.extend(range(pos, m.start()))
        code = m.group(1) or m.group(2) or m.group(3)
        chars.append(chr(int(code, 16)) if code else m.group(4))
        starts.append(m.start())
        pos = m.end()
    chars.extend(text[pos:])
    starts.extend(range(pos, len(text) + 1))
    return "".join(chars), starts


def request_secrets(url: str, headers: Mapping[str, str]) -> set[str]:
    found: set[str] = set()
    for value in headers.values():
        words = [word for word in value.split() if len(word) >= _LONG]
        found.update(words or [value])
    parts = urlsplit(url)
    found.update(p for p in (parts.username, parts.password) if p)
    for pair in parts.query.split("&"):
        found.add(pair.partition("=")[2])
    return found


def environment_secrets(environ: Mapping[str, str] = os.environ) -> set[str]:
    """Values of variables named like credentials: long, one word, not a path."""
    return {
        value
        for name, value in environ.items()
        if _CREDENTIAL_NAME.search(name)
        and len(value) >= 12
        and not value.startswith(("/", "~", "."))
        and len(value.split()) == 1
    }
