"""`run --server-metrics URL` (issue 23 item 5): the server's Prometheus page read during the
run, each scrape a line of server_metrics.jsonl, summarised in summary.json and on the console;
a metrics URL that fails is recorded, never a failed run. Against `perfbench mock serve`, whose
/metrics publishes vLLM's names, on loopback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from perfbench.engine.scraper import parse
from tests.helpers import CASES, invoke, mock_process

RUN = ("--runs", "2", "--warmup", "0", "--scrape-interval", "0.2", "-c", "2")


def test_the_mock_servers_metrics_are_scraped_during_the_run(tmp_path: Path) -> None:
    with mock_process("default") as url:
        done = invoke("run", str(CASES / "plan.yaml"), "-t", "openai/m", "--base-url", f"{url}/v1",
                   "--server-metrics", f"{url}/metrics", *RUN, "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    lines = [
        json.loads(line) for line in (run_dir / "server_metrics.jsonl").read_text().splitlines()
    ]
    assert len(lines) >= 3 and all("values" in line for line in lines)
    assert [line["t"] for line in lines] == sorted(line["t"] for line in lines)
    scraped = json.loads((run_dir / "summary.json").read_text())["server_metrics"]
    running = scraped["series"]['vllm:num_requests_running{model_name="default"}']
    assert next(iter(scraped["series"])).startswith("vllm:num_requests_running")  # known first
    assert 1 <= running["max"] <= 2  # -c 2: at most 2 requests at once
    assert scraped["scrapes"] == len(lines) and scraped["failed"] == 0
    assert "server metrics:" in done.stdout and "vllm:num_requests_running" in done.stdout
    report = invoke("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Server metrics" in text and "vllm:num_requests_running" in text


def test_a_metrics_url_that_fails_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock+http", "--server-metrics",
               f"http://127.0.0.1:{closed}/metrics", *RUN, "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    scraped = json.loads((run_dir / "summary.json").read_text())["server_metrics"]
    assert scraped["scrapes"] == 0 and scraped["failed"] >= 1 and scraped["first_error"]


def test_only_gauges_and_counters_are_kept() -> None:
    page = """# TYPE q gauge
q{b="2",a="1"} 3
# TYPE served_total counter
served_total 7
untyped 1
# TYPE lat histogram
lat_bucket{le="1"} 1
lat_count 1
lat_sum 0.5
"""
    assert parse(page) == {'q{a="1",b="2"}': 3.0, "served_total": 7.0, "untyped": 1.0}


def test_a_resumed_runs_scrapes_are_on_the_runs_clock(tmp_path: Path) -> None:
    # Interrupted as a kill leaves a run (the first 3 of its tasks kept), then resumed: the
    # new session's scrapes start where the run's clock continues, the last kept task's end,
    # not at 0 again, so they sit beside the samples they watched.
    with mock_process("default") as url:
        args = ("-t", "openai/m", "--base-url", f"{url}/v1", "--server-metrics",
                f"{url}/metrics")  # fmt: skip
        done = invoke("run", str(CASES / "plan.yaml"), *args, *RUN, "--out", str(tmp_path))
        assert done.returncode == 0, done.stderr
        (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
        meta = json.loads((run_dir / "meta.json").read_text())
        meta["status"] = "interrupted"
        (run_dir / "meta.json").write_text(json.dumps(meta))
        kept = (run_dir / "samples.jsonl").read_text().splitlines(keepends=True)[:3]
        (run_dir / "samples.jsonl").write_text("".join(kept))
        (run_dir / "summary.json").unlink()
        metrics = run_dir / "server_metrics.jsonl"
        before = len(metrics.read_text().splitlines())
        resumed = invoke("run", "--resume", str(run_dir), "-q")
    assert resumed.returncode == 0, resumed.stderr
    resumed_from = max(json.loads(line)["end"] for line in kept)
    lines = metrics.read_text().splitlines()
    again = [json.loads(line)["t"] for line in lines[before:]]
    assert again and again[0] >= resumed_from - 0.01, (resumed_from, again)


def test_a_sweep_scrapes_the_server_at_every_level(tmp_path: Path) -> None:
    with mock_process("default") as url:
        done = invoke("sweep", str(CASES / "answer.yaml"), "-t", "openai/m", "--base-url",
                   f"{url}/v1", "--server-metrics", f"{url}/metrics", "--scrape-interval", "0.2",
                   "--concurrency", "1,2", "--runs", "1", "--warmup", "0", "-q",
                   "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (sweep_dir,) = [d for d in tmp_path.iterdir() if (d / "sweep.json").exists()]
    levels = [p.parent for p in sweep_dir.rglob("meta.json")]
    assert len(levels) == 2
    for level in levels:
        scraped = json.loads((level / "summary.json").read_text())["server_metrics"]
        assert scraped["scrapes"] >= 1 and scraped["failed"] == 0, level
    plan = json.loads((sweep_dir / "sweep-plan.json").read_text())
    assert plan["server_metrics"] == f"{url}/metrics" and plan["scrape_interval"] == 0.2
