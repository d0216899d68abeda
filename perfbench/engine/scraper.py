"""A serving engine's own metrics during a run (`run --server-metrics URL`): its Prometheus
endpoint (vLLM, SGLang and TGI publish running and waiting requests, KV-cache use) read every
``interval`` seconds while the run's tasks run, each scrape a line of the run directory's
``server_metrics.jsonl`` (``{"t", "values"}``, or ``{"t", "error"}`` for a scrape that failed:
a server that stops answering its metrics is recorded, never a failed run), and a compact
summary (``summary.json`` → ``server_metrics``: at most ``MAX_SERIES`` series of at most
``POINTS`` points) for the console and the report, on the run's own time axis."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from perfbench.clock import Clock, sleep_until
from perfbench.http.urls import recorded_url
from perfbench.stats.server_metrics import rank

MAX_SERIES = 40
POINTS = 64
MAX_BODY = 4 << 20  # a metrics page is kilobytes; more is not one


class Scraper:
    def __init__(
        self, url: str, interval: float, out: Path | None, clock: Clock, offset: float = 0.0
    ) -> None:
        self.url, self.interval, self.out = url, interval, out
        # Times are on the run's clock, as the samples' are: from the scraper's start, made
        # just before the runner takes its t0, plus where a resumed run's clock continues
        # from (``offset``, ``Resume.clock_offset``).
        self.clock, self.t0 = clock, clock() - offset
        self.series: dict[str, list[tuple[float, float]]] = {}
        self.scrapes = 0
        self.failed = 0
        self.first_error: str | None = None

    async def run(self) -> None:
        """Scrape until cancelled (the session cancels it when its tasks are done)."""
        timeout = httpx.Timeout(max(0.5, min(5.0, self.interval)))
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            tick = self.clock()
            while True:
                await self._scrape(client)
                tick += self.interval
                await sleep_until(self.clock, max(tick, self.clock()))

    async def _scrape(self, client: httpx.AsyncClient) -> None:
        t = self.clock() - self.t0
        try:
            values = parse(await _fetch(client, self.url))
        # Broad on purpose: the server's metrics are an observation beside the run, and no
        # page it serves (or fails to) may end the run; each failure is recorded as a line.
        except Exception as exc:
            self.failed += 1
            error = f"{type(exc).__name__}: {exc}"[:300]
            self.first_error = self.first_error or error
            self._write({"t": t, "error": error})
            return
        self.scrapes += 1
        for key, value in values.items():
            points = self.series.get(key)
            if points is None:
                if len(self.series) >= 4 * MAX_SERIES:
                    continue  # a server of thousands of series: keep the first
                points = self.series[key] = []
            points.append((t, value))
        self._write({"t": t, "values": values})

    def _write(self, line: dict[str, Any]) -> None:
        if self.out is None:
            return
        with self.out.open("ab") as f:  # one line a scrape, flushed as it is written
            f.write(orjson.dumps(line) + b"\n")

    def summary(self) -> dict[str, Any]:
        """The scrapes in brief: the known series first, then the others by name."""
        ordered = sorted(self.series, key=lambda k: (rank(k), k))[:MAX_SERIES]
        return {
            "url": recorded_url(self.url),
            "interval_s": self.interval,
            "scrapes": self.scrapes,
            "failed": self.failed,
            "first_error": self.first_error,
            "series": {key: _brief(self.series[key]) for key in ordered},
        }


class _Refused(Exception):
    """The metrics URL answered, but not with metrics."""


async def _fetch(client: httpx.AsyncClient, url: str) -> str:
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise _Refused(f"HTTP {response.status_code} from the metrics URL")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_BODY:
                raise _Refused(f"a metrics page over {MAX_BODY >> 20} MiB")
    return body.decode("utf-8", errors="replace")


def parse(text: str) -> dict[str, float]:
    """Gauges, counters and untyped samples of a Prometheus text page, as
    ``name{label="v",…}`` → value (histograms and summaries are left out: their buckets are
    many series, and the client measures those distributions itself)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type not in ("gauge", "counter", "unknown"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created") or not math.isfinite(sample.value):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


def _brief(points: list[tuple[float, float]]) -> dict[str, Any]:
    values = [v for _, v in points]
    step = max(1, math.ceil(len(points) / POINTS))
    kept = points[::step]
    if kept[-1] is not points[-1]:
        kept.append(points[-1])  # the last scrape always shows
    return {
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
        "last": values[-1],
        "points": [[round(t, 3), v] for t, v in kept],
    }
