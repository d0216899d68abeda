"""The report's server-metrics chart: a run with `--server-metrics` gets its scraped gauges
drawn under its client timeline (one figure per run, linked from report.md and inlined in
report.html); a run without gets none; a damaged server_metrics.jsonl never stops a report.
The file is written by the scraper itself, against a metrics page served by httpx's mock
transport, so the format is the one runs write."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx

from perfbench.engine.scraper import Scraper
from perfbench.report import release
from perfbench.sample import Phase, Sample
from perfbench.stats.server_metrics import Scrape, on_run_axis
from perfbench.stats.summary import Summary, summarize

MODEL = '{model_name="m"}'
RUNNING = f"vllm:num_requests_running{MODEL}"
WAITING = f"vllm:num_requests_waiting{MODEL}"
KV = f"vllm:kv_cache_usage_perc{MODEL}"


def samples() -> list[Sample]:
    """A warmup pass then a measured one, a task ending every 0.25 s for 6 s."""
    out = []
    for i in range(24):
        phase: Phase = "warmup" if i < 4 else "measured"
        end = 0.25 * (i + 1)
        out.append(Sample(phase, 0, "a", i, "en", start=end - 0.2, end=end, status="ok"))
    return out


def page(step: int) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{MODEL} {min(step, 4)}\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{MODEL} {max(0, step - 4)}\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{MODEL} {step / 10}\n"
        "# TYPE vllm:request_success_total counter\n"
        f"vllm:request_success_total{MODEL} {3 * step}\n"
    )


def scrape(run_dir: Path, steps: int = 8, fail_at: int = 5) -> dict[str, Any]:
    """server_metrics.jsonl as a run writes it, a scrape every 0.5 s (scrape ``fail_at``
    answers 500); returns the summary's ``server_metrics``."""
    now = [100.0]  # the scraper's clock: its own origin, as in a run
    step = [0]

    def answer(request: httpx.Request) -> httpx.Response:
        if step[0] == fail_at:
            return httpx.Response(500)
        return httpx.Response(200, text=page(step[0]))

    scraper = Scraper(
        "http://server/metrics", 0.5, run_dir / "server_metrics.jsonl", lambda: now[0]
    )

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            for step[0] in range(steps):
                now[0] = 100.0 + 0.5 * step[0]
                await scraper._scrape(client)

    anyio.run(main)
    return scraper.summary()


def run(tmp: Path, name: str, summary: Summary, **meta: Any) -> release.RunData:
    path = tmp / name
    path.mkdir(exist_ok=True)
    doc: Any = {"id": name, "label": name, "status": "completed", "target": "openai/m",
                "started_at": "2026-12-01T00:00:00", "suite": {"name": "s", "digest": "0" * 12},
                **meta}  # fmt: skip
    return release.RunData(path, doc, summary)


def with_metrics(tmp: Path, name: str = "served") -> release.RunData:
    summary = summarize(samples(), {"a": 60.0})
    data = run(tmp, name, summary)
    summary["server_metrics"] = scrape(data.path)
    return data


def build(tmp: Path, *runs: release.RunData) -> tuple[Path, str, str]:
    out = tmp / "report"
    md = release.build(list(runs), None, out)
    return out, md.read_text(), (out / "report.html").read_text()


def test_a_run_with_server_metrics_gets_its_gauges_under_its_timeline(tmp_path: Path) -> None:
    out, md, page_html = build(tmp_path, with_metrics(tmp_path))
    assert (out / "server-1.png").stat().st_size > 0
    svg = (out / "server-1.svg").read_text()
    assert "(server-1.png)" in md and "[SVG](server-1.svg)" in md
    assert md.index("## Server metrics") < md.index("(server-1.png)")
    # report.html inlines the SVG in place of the Markdown's relative image.
    images = re.findall(r'<img[^>]*src="([^"]+)"[^>]*alt="Chart: the server', page_html)
    images += re.findall(r'<img[^>]*alt="Chart: the server[^"]*"[^>]*src="([^"]+)"', page_html)
    assert images and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    # The client's lines, then the server's: requests (running before waiting) and KV cache.
    for gid in ("p95-r0", "done-r0", "warmup-r0", "server-p0-s0", "server-p0-s1",
                "server-p1-s0", "scrape-failed"):  # fmt: skip
        assert f'id="{gid}"' in svg, gid
    assert "server-p2-s0" not in svg  # the known gauges are there: no panel of the others
    assert svg.index("vllm:num_requests_running") < svg.index("vllm:num_requests_waiting")
    assert "request_success_total" not in svg  # a counter, not a gauge: left out
    assert "KV cache use (%)" in svg


def test_the_chart_reads_the_file_on_the_runs_time_axis(tmp_path: Path) -> None:
    data = with_metrics(tmp_path)
    series, failed = release.server_series(data) or ({}, [])
    assert failed == [2.5]  # the sixth scrape, 0.5 s apart from the scraper's start
    running = series[RUNNING]
    assert [t for t, v in running if v == v] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 3.5]
    panels = release.server_panels(series)
    assert [list(p.series) for p in panels] == [[RUNNING, WAITING], [KV]]
    assert [v for _, v in panels[1].series[KV] if v == v][-1] == 70.0  # 0.7 of the cache, in %


def test_a_resumed_runs_scrapes_replace_those_of_the_lost_stretch() -> None:
    first = [Scrape(0.0, {}), Scrape(1.0, None), Scrape(2.0, {})]
    # Resumed from the last kept task's end, 1.5 s: the scrape at 2.0 watched lost tasks.
    again = [Scrape(1.5, {}), Scrape(2.5, {})]
    assert [s.t for s in on_run_axis(first + again)] == [0.0, 1.0, 1.5, 2.5]
    assert [s.t for s in on_run_axis(first)] == [0.0, 1.0, 2.0]


def test_a_run_without_server_metrics_gets_no_server_chart(tmp_path: Path) -> None:
    plain = run(tmp_path, "plain", summarize(samples(), {"a": 60.0}))
    out, md, _ = build(tmp_path, plain)
    assert not list(out.glob("server-*")) and "server-" not in md
    assert "Server metrics" not in md
    assert (out / "timeline.png").is_file()  # the client's own timeline is still drawn


def test_only_the_runs_with_server_metrics_get_a_chart(tmp_path: Path) -> None:
    plain = run(tmp_path, "plain", summarize(samples(), {"a": 60.0}))
    out, md, _ = build(tmp_path, plain, with_metrics(tmp_path))
    assert sorted(p.name for p in out.glob("server-*")) == ["server-2.png", "server-2.svg"]
    assert "(server-2.png)" in md and "**served**" in md


def test_garbage_lines_are_skipped_and_the_report_still_builds(tmp_path: Path) -> None:
    data = with_metrics(tmp_path)
    path = data.path / "server_metrics.jsonl"
    good = path.read_bytes().splitlines(keepends=True)
    text_value = b'{"t": 9.0, "values": {"' + RUNNING.encode() + b'": "many"}}\n'
    garbage = [b"not json\n", b"[1, 2]\n", b'{"t": "soon", "values": {}}\n', b'{"t": 1e999}\n',
               text_value, b"\xff\xfe\n"]  # fmt: skip
    path.write_bytes(good[0] + b"".join(garbage) + b"".join(good[1:]) + b'{"t": 4.0, "val')
    out, md, _ = build(tmp_path, data)
    assert "(server-1.png)" in md and (out / "server-1.svg").is_file()
    series, failed = release.server_series(data) or ({}, [])
    assert len([v for _, v in series[RUNNING] if v == v]) == 7 and failed == [2.5]
    assert 9.0 not in [t for t, _ in series[RUNNING]]  # the line with a text value added none


def test_a_missing_file_falls_back_to_the_summary_unless_resumed(tmp_path: Path) -> None:
    data = with_metrics(tmp_path)
    (data.path / "server_metrics.jsonl").unlink()
    series, _ = release.server_series(data) or ({}, [])
    assert [t for t, _ in series[RUNNING]] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 3.5]
    resumed = run(tmp_path, data.name, data.summary, resumed=["2026-12-01T00:10:00"])
    assert release.server_series(resumed) is None
    _, md, _ = build(tmp_path, resumed)
    assert "server-1.png" not in md and "## Server metrics" in md  # the table still shows
