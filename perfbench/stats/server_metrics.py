"""The server's own metrics (``run --server-metrics``) as numbers: which series come first, and
the scrapes put on the run's time axis, so the report draws them under the client's timeline.

Here rather than in ``engine.scraper`` because the scraper (which records) and the report
(which draws) both need the names, and the report may not import the engine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

# Shown first, by the engines' own names: the figures that say whether the server queued.
KNOWN = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "tgi_queue_size",
    "tgi_batch_current_size",
)
# The known gauges that are a share of the KV cache (0–1 in vLLM and SGLang, despite "perc"),
# drawn apart from the request counts: one axis cannot show 0.4 beside 120 requests.
USAGE = frozenset({"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"})


class Scrape(NamedTuple):
    """One line of server_metrics.jsonl: seconds since the scraper started, and the values
    read (None for a scrape that failed)."""

    t: float
    values: Mapping[str, float] | None


def metric_name(key: str) -> str:
    """The metric's name without its labels: ``vllm:x{model_name="m"}`` → ``vllm:x``."""
    return key.split("{", 1)[0]


def rank(key: str) -> int:
    """A series' place: the known gauges in ``KNOWN`` order, then everything else."""
    return KNOWN.index(metric_name(key)) if metric_name(key) in KNOWN else len(KNOWN)


def on_run_axis(scrapes: Iterable[Scrape]) -> list[Scrape]:
    """The scrapes that lie on the run's time axis, the clock of the client's timeline
    (``stats.timeline``: sample ends since the session's t0), in order.

    The scraper records on the run's clock, so a resumed run's scrapes continue from where
    its clock does (the last kept task's end). The interrupted session's scrapes after that
    point watched tasks that were lost and are run again: a ``t`` that goes back starts a
    resumed session, and the earlier scrapes from that ``t`` on are dropped."""
    out: list[Scrape] = []
    for scrape in scrapes:
        while out and out[-1].t >= scrape.t:
            out.pop()
        out.append(scrape)
    return out
