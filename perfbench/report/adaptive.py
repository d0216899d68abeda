"""What an adaptive (AIMD) run's limit amounts to, in one line (pure): a converged
concurrency only under the stated rule (``load.aimd.CONVERGED_EPISODES``); a rate window
(429s with one task in flight) as the rates it admitted, not as a concurrency."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfbench.load.aimd import CONVERGED_EPISODES, CONVERGED_SPREAD

_WINDOW_SIGNS = {
    "budget": "its 429s said a per-minute budget was spent",
    "one in flight": "429s came with one task in flight",
}


def adaptive_line(summary: Mapping[str, Any]) -> str | None:
    adaptive = summary.get("adaptive")
    if not adaptive:
        return None
    changes = len(adaptive.get("history") or [])
    episodes = adaptive.get("episodes")
    if episodes is None:  # a summary written before the rule: its figure as it was named
        limit = adaptive.get("converged_limit")
        return None if limit is None else f"adaptive: mean limit {limit:.1f} ({changes} changes)"
    window = adaptive.get("window")
    if window:
        shown = _WINDOW_SIGNS.get(window, "the 429s showed it")
        return (
            f"adaptive: the limit is a rate window (requests or tokens per minute), not a "
            f"concurrency: {shown}. Admitted {_admitted(summary)} ({episodes} rate-limit "
            "episodes); a concurrency limit does not apply"
        )
    peaks = adaptive.get("episode_limits") or []
    converged = adaptive.get("converged_limit")
    if converged is not None:
        last = peaks[-CONVERGED_EPISODES:]
        return (
            f"adaptive: converged limit {converged:.1f} ({episodes} rate-limit episodes, the "
            f"last {len(last)} at limits {min(last)}–{max(last)}; {changes} changes)"
        )
    mean = adaptive.get("mean_limit")
    shown = "–" if mean is None else f"{mean:.1f}"
    return (
        f"adaptive: not converged: {episodes} rate-limit episode(s), and converging takes "
        f"{CONVERGED_EPISODES} at limits within {CONVERGED_SPREAD:.0%} of each other; mean "
        f"limit {shown} over the run's second half ({changes} changes). Run longer "
        "(--runs, --repeat) for a converged limit"
    )


def _admitted(summary: Mapping[str, Any]) -> str:
    """Requests and tokens a minute that were answered (all runs pooled)."""
    overall = summary.get("pooled", {}).get("overall", {})
    rate, failed = overall.get("request_rate"), overall.get("request_error_rate") or 0.0
    out_rate, tokens_in, tokens_out = (
        overall.get("output_tokens_per_s"),
        overall.get("tokens_in"),
        overall.get("tokens_out"),
    )
    parts = []
    if rate:
        parts.append(f"{rate * (1 - failed) * 60:,.0f} requests/min")
    if out_rate and tokens_out:
        parts.append(
            f"{out_rate * (tokens_out + (tokens_in or 0)) / tokens_out * 60:,.0f} tokens/min"
        )
    return ", ".join(parts) or "no requests"
