"""Rate limits of the mock server: requests per minute and tokens per minute as token buckets
(each holds ``burst_s`` seconds' worth), and a cap on concurrent requests. Pure logic over an
injected clock, so tests drive it in virtual time."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from perfbench.mock.profile import RateLimits


@dataclass(frozen=True)
class Quota:
    """What a rate-limit header reports, after the decision on one request."""

    admitted: bool
    retry_after: float  # seconds until the request could pass (0 when admitted)
    reason: str = ""  # which limit refused it: requests, tokens or concurrency
    requests_limit: float | None = None
    requests_remaining: int | None = None
    requests_reset: float = 0.0  # seconds until the request bucket is full again
    tokens_limit: float | None = None
    tokens_remaining: int | None = None
    tokens_reset: float = 0.0


class _Bucket:
    def __init__(self, per_minute: float, burst_s: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.updated = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (a request larger than the bucket waits for a
        full bucket, so it can pass at all)."""
        need = min(amount, self.capacity)
        return max(0.0, (need - self.level) / self.rate)

    def reset(self) -> float:
        return (self.capacity - self.level) / self.rate


class Limiter:
    def __init__(self, limits: RateLimits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.clock = clock
        now = clock()
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        self._requests = _Bucket(rpm, limits.burst_s, now) if rpm else None
        self._tokens = _Bucket(tpm, limits.burst_s, now) if tpm else None
        self.in_flight = 0

    @property
    def active(self) -> bool:
        limits = self.limits
        return any((limits.requests_per_minute, limits.tokens_per_minute, limits.concurrent))

    def admit(self, tokens: int) -> Quota:
        """Decide one request that will use ``tokens``; an admitted request holds a concurrency
        slot until ``release``."""
        now = self.clock()
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                bucket.refill(now)
        refusal = self._refusal(tokens)
        if refusal is None:
            if self._requests is not None:
                self._requests.level -= 1
            if self._tokens is not None:
                self._tokens.level -= min(tokens, self._tokens.level)
            self.in_flight += 1
            return self._quota(True, 0.0, "")
        reason, wait = refusal
        fixed = self.limits.retry_after_s
        return self._quota(False, wait if fixed is None else fixed, reason)

    def release(self) -> None:
        self.in_flight -= 1

    def _refusal(self, tokens: int) -> tuple[str, float] | None:
        if self._requests is not None and self._requests.level < 1:
            return "requests", self._requests.wait_for(1)
        if self._tokens is not None and self._tokens.wait_for(tokens) > 0:
            return "tokens", self._tokens.wait_for(tokens)
        cap = self.limits.concurrent
        if cap is not None and self.in_flight >= cap:
            return "concurrency", 1.0  # unknown: when a request in flight ends
        return None

    def _quota(self, admitted: bool, wait: float, reason: str) -> Quota:
        r, t = self._requests, self._tokens
        return Quota(
            admitted=admitted,
            retry_after=wait,
            reason=reason,
            requests_limit=self.limits.requests_per_minute,
            requests_remaining=math.floor(r.level) if r else None,
            requests_reset=r.reset() if r else 0.0,
            tokens_limit=self.limits.tokens_per_minute,
            tokens_remaining=math.floor(t.level) if t else None,
            tokens_reset=t.reset() if t else 0.0,
        )
