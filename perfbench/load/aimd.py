"""AIMD concurrency control on rate-limit feedback.

Slow start: the limit doubles after each clean round (``limit`` successful tasks that started
under the current limit) until the first rate-limit episode. Then each episode multiplies the
limit by ``decrease`` once, and for ``max(cooldown_s, Retry-After)`` nothing new starts and the
limit does not grow; then growth resumes one step per clean round. Other failures (5xx,
timeouts) reset the round: they pause growth but are not rate limits.

A 429 is heard when it arrives (``refused``), not when its task ends: a task that retries after
a backoff ended much later, and meanwhile the others finished clean and slow start doubled the
limit past the server's. A later 429 of the same episode that asks a longer wait extends the
hold. An ask past ``max_wait_s`` (--max-retry-wait, 60 s by default) is refused as the task
refuses it, not waited for: the hold is then the cooldown alone, so a server asking a day,
``inf`` or 999999999 s neither stops the run nor holds each episode for the whole cap. Pure:
429s and samples in, limit out; the runner applies the limit and the hold."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from perfbench.load import Adaptive
from perfbench.sample import Sample

MAX_HOLD_S = 60.0  # the longest Retry-After held by default: the SDKs' and --max-retry-wait's
# "Converged" is a rule, not a mean: the last CONVERGED_EPISODES rate-limit episodes began at
# limits within CONVERGED_SPREAD of each other (or 1). One episode averaged over slow start
# had read "converged limit 21.4" against a gateway admitting 60 requests a minute.
CONVERGED_EPISODES = 3
CONVERGED_SPREAD = 0.25
# A window (requests or tokens per minute) refuses whatever the concurrency until it passes.
# Known when the 429s say a per-minute budget is spent (x-ratelimit-remaining-*: 0) in most
# episodes, or when 429s came with one task in flight (WINDOW_EPISODES times after the first
# episode, so that tasks of a higher limit were gone): no concurrency limit refuses that.
WINDOW_EPISODES = 2


@dataclass
class Aimd:
    shape: Adaptive
    max_wait_s: float = MAX_HOLD_S  # --max-retry-wait: a longer Retry-After is not waited for
    limit: int = 0
    slow_start: bool = True
    history: list[tuple[float, int]] = field(default_factory=list)  # (time, new limit)
    episodes: list[tuple[float, int]] = field(default_factory=list)  # (time, limit refused at)
    window_episodes: int = 0  # episodes whose 429s said a per-minute budget was spent
    _window_said: bool = False  # the episode running now's did
    _since: float = float("-inf")  # tasks started before this ran under an older limit
    _hold_until: float = float("-inf")
    _clean: int = 0

    def __post_init__(self) -> None:
        self.limit = max(1, min(self.shape.start, self.shape.maximum))
        self.history.append((0.0, self.limit))  # sample times count from the run's start

    def refused(self, now: float, retry_after: float | None, window: bool = False) -> int:
        """A 429 answer arrived at ``now`` (run time), asking to wait ``retry_after``;
        ``window``: it said a per-minute budget was spent."""
        if now >= self._hold_until:  # a new episode
            self.episodes.append((now, self.limit))
            self._window_said = False
            self._set(max(1, math.floor(self.limit * self.shape.decrease)), now)
            self.slow_start = False
            self._hold_until = now + self.shape.cooldown_s
        if window and not self._window_said:
            self._window_said = True
            self.window_episodes += 1
        # NaN and negatives: no wait asked; past max_wait_s: refused, as the task refuses it.
        if retry_after and 0 < retry_after <= self.max_wait_s:
            self._hold_until = max(self._hold_until, now + retry_after)
        return self.limit

    def observe(self, sample: Sample, heard: int = 0) -> int:
        """Update on one finished task; returns the (possibly new) limit. ``heard``: how many
        of its 429s ``refused`` was already told of (the rest count now, at its end)."""
        now = sample.end
        untold = sample.throttled - heard
        if untold > 0 or (sample.status == "rate_limited" and not sample.throttled):
            self.refused(now, sample.retry_after)
        if sample.throttled or sample.status == "rate_limited":
            self._clean = 0
            return self.limit
        if sample.status != "ok":
            self._clean = 0
            return self.limit
        if sample.start < self._since:
            return self.limit  # it ran under an older limit: says nothing about this one
        self._clean += 1
        if self._clean >= self.limit and now >= self._hold_until:
            grown = self.limit * 2 if self.slow_start else self.limit + 1
            self._set(min(self.shape.maximum, grown), now)
        return self.limit

    @property
    def hold_until(self) -> float:
        """No task should start before this (run-relative) time: the server asked to wait."""
        return self._hold_until

    def _set(self, limit: int, now: float) -> None:
        self._clean = 0
        self._since = now
        if limit != self.limit:
            self.limit = limit
            self.history.append((now, limit))

    def converged(self) -> float | None:
        """The converged limit (the time-weighted mean over the history's second half), or
        None until the rule holds (``CONVERGED_EPISODES``) or when the limit is a window."""
        if self.window() is not None or not self._bounded():
            return None
        return self.mean_limit()

    def _bounded(self) -> bool:
        peaks = [limit for _, limit in self.episodes[-CONVERGED_EPISODES:]]
        if len(peaks) < CONVERGED_EPISODES:
            return False
        return max(peaks) - min(peaks) <= max(1.0, CONVERGED_SPREAD * max(peaks))

    def window(self) -> str | None:
        """How the server showed it limits a rate over a window, not a concurrency (see
        ``WINDOW_EPISODES``): ``budget`` (its 429s said so) or ``one in flight``; None."""
        if self.episodes and self.window_episodes * 2 > len(self.episodes):
            return "budget"
        if sum(1 for _, limit in self.episodes[1:] if limit <= 1) >= WINDOW_EPISODES:
            return "one in flight"
        return None

    def mean_limit(self) -> float | None:
        """The time-weighted mean limit over the second half of the history's span."""
        if len(self.history) < 2:
            return float(self.limit) if self.history else None
        first, last = self.history[0][0], self.history[-1][0]
        mid = (first + last) / 2
        total = weight = 0.0
        for (t0, limit), (t1, _) in zip(self.history, self.history[1:], strict=False):
            lo, hi = max(t0, mid), t1
            if hi > lo:
                total += limit * (hi - lo)
                weight += hi - lo
        return total / weight if weight else float(self.history[-1][1])

    def reading(self) -> dict[str, object]:
        """summary.json's ``adaptive``: the history, and what it amounts to."""
        return {
            "history": self.history,
            "episodes": len(self.episodes),
            "episode_limits": [limit for _, limit in self.episodes],
            "window": self.window(),
            "converged_limit": self.converged(),
            "mean_limit": self.mean_limit(),
        }
