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
    """The scrapes with ``t`` in seconds since the run started, the clock of the client's
    timeline (``stats.timeline``: sample ends since the session's t0).

    A scraper counts from its own start, taken just before the runner takes its t0 (the same
    monotonic clock, microseconds apart), so a run of one session needs no change. A resumed
    run is the exception: its runner's clock continues from where the run stopped (``Resume.
    clock_offset``, the last kept task's end) while its new scraper, appending to the same
    file, starts again from 0. A ``t`` that goes back therefore starts a session, and it is
    moved to follow the previous session's last scrape: that is within about one scrape
    interval of the offset the runner used, which the file does not record."""
    out: list[Scrape] = []
    offset = last = 0.0
    for scrape in scrapes:
        if scrape.t < last:  # the scraper of a resumed session, counting from 0 again
            offset += last
        last = scrape.t
        out.append(Scrape(offset + scrape.t, scrape.values))
    return out
