"""When to retry a refused model call, and how long to wait first.

429 and 5xx answers are retried up to ``max_retries`` times, never sooner than the server asks:
``retry-after-ms`` and gateways' prefixed ``*-retry-after-ms`` (the most precise, so first),
``retry-after`` and ``*-retry-after`` (seconds or an HTTP date), and otherwise the providers'
reset headers for an exhausted limit (OpenAI ``x-ratelimit-reset-*`` durations such as
``6m0s``; Anthropic ``anthropic-ratelimit-*-reset`` times). Without any of those: exponential
backoff with jitter. A wait longer than ``max_wait_s`` (``--max-retry-wait``) is not waited
for: the call ends as refused at once, as the official SDKs give up on a Retry-After over 60 s.
Pure functions; the caller sleeps."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# As the official OpenAI and Anthropic SDKs retry: these, and every 5xx (529 is Anthropic's
# overloaded), unless the server's ``x-should-retry`` header says otherwise.
RETRYABLE = frozenset({408, 409, 429})


MAX_WAIT_S = 60.0  # as the official SDKs: a longer Retry-After is not waited for


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    base_s: float = 0.5  # first backoff without a server hint; doubles each attempt
    max_wait_s: float = MAX_WAIT_S  # the longest wait before a retry (a backoff is capped here)
    jitter: float = 0.2  # waits are stretched by up to this fraction, never shortened

    def should_retry(
        self, status: int, attempt: int, headers: Mapping[str, str] | None = None
    ) -> bool:
        if attempt >= self.max_retries:
            return False
        lower = {k.lower(): v for k, v in (headers or {}).items()}  # as server_wait reads them
        told = lower.get("x-should-retry", "").strip().lower()
        if told in ("true", "false"):  # the server's own say wins, as in the SDKs
            return told == "true"
        return status in RETRYABLE or status >= 500

    def delay(self, attempt: int, asked: float | None, rng: random.Random) -> float | None:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0),
        given what the server ``asked`` (``server_wait``), or None when it asked for more
        than ``max_wait_s``: give up rather than retry early."""
        if asked is None:
            backoff = min(self.max_wait_s, self.base_s * 2.0**attempt)
            return backoff * (1 + self.jitter * rng.random())
        if asked > self.max_wait_s:
            return None
        return asked * (1 + self.jitter * rng.random())


def server_wait(headers: Mapping[str, str], now: datetime) -> float | None:
    """How long the server asked the client to wait, in seconds, or None if it did not say."""
    lower = {k.lower(): v for k, v in headers.items()}
    for name, value in lower.items():  # milliseconds first: the most precise a server sends
        if name == "retry-after-ms" or name.endswith("-retry-after-ms"):
            ms = _number(value)
            if ms is not None:
                return ms / 1000
    for name, value in lower.items():
        if name == "retry-after" or name.endswith("-retry-after"):
            found = _seconds_or_date(value, now)
            if found is not None:
                return found
    return _reset_wait(lower, now)


def window_spent(headers: Mapping[str, str]) -> bool:
    """Whether a 429's headers say a per-minute budget is spent (OpenAI's, LiteLLM's
    ``x-ratelimit-remaining-requests: 0``, Anthropic's ``anthropic-ratelimit-*-remaining``):
    a window that refuses whatever the concurrency until it passes."""
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    for kind in _BUDGETS:
        for name in (f"x-ratelimit-remaining-{kind}", f"anthropic-ratelimit-{kind}-remaining"):
            if lower.get(name) == "0":
                return True
    return False


def _reset_wait(headers: dict[str, str], now: datetime) -> float | None:
    """The reset time of each exhausted limit (remaining 0); the longest wins."""
    waits = []
    for kind in _BUDGETS:
        if headers.get(f"x-ratelimit-remaining-{kind}") == "0":
            wait = _duration(headers.get(f"x-ratelimit-reset-{kind}", ""))
            if wait is not None:
                waits.append(wait)
        if headers.get(f"anthropic-ratelimit-{kind}-remaining") == "0":
            wait = _seconds_or_date(headers.get(f"anthropic-ratelimit-{kind}-reset", ""), now)
            if wait is not None:
                waits.append(wait)
    return max(waits) if waits else None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def _seconds_or_date(text: str, now: datetime) -> float | None:
    seconds = _number(text)
    if seconds is not None:
        return seconds
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


_BUDGETS = ("requests", "tokens", "input-tokens", "output-tokens")  # limits with a reset
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(text: str) -> float | None:
    """OpenAI's durations: ``1s``, ``120ms``, ``6m0s``, ``1h2m3.5s``."""
    parts = _PART.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)
