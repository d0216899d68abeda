"""`run --metrics-port P`: Prometheus metrics of the run while it works, from
prometheus-client, on 127.0.0.1; the Grafana board shipped in docs/grafana reads only metrics
perfbench exports. The run is under virtual time; the page is scraped over loopback."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from perfbench import store
from perfbench.cli.events import Progress
from perfbench.engine.session import Session
from perfbench.errors import PerfbenchError
from perfbench.spec import Plan, RunSpec
from perfbench.suite import Suite
from perfbench.targets.mock import MockAgent
from perfbench.telemetry import HOST, Telemetry
from tests.helpers import fixed_profile

BOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "perfbench.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


@pytest.mark.anyio
async def test_the_task_counters_equal_the_runs_tasks(example_suite: Suite, tmp_path: Path) -> None:
    telemetry = Telemetry(_free_port())
    telemetry.open()
    try:
        spec = RunSpec(plan=Plan(runs=2, warmup=1, concurrency=4), out=str(tmp_path))
        progress = Progress([telemetry])
        session = Session(spec, progress, suite=example_suite, target=MockAgent(fixed_profile()))
        result = await session.run()
        assert result.run_dir is not None
        found = _scrape(telemetry.port)
    finally:
        telemetry.close()
    samples = list(store.read_samples(result.run_dir))
    finished = found["perfbench_tasks_finished_total"]
    assert sum(v for _, v in finished) == len(samples) == 48
    measured = sum(v for labels, v in finished if labels["phase"] == "measured")
    assert measured == result.summary["pooled"]["overall"]["tasks"] == 32
    assert found["perfbench_tasks_started_total"] == [({}, 48.0)]
    assert found["perfbench_tasks_in_flight"] == [({}, 0.0)]
    assert found["perfbench_concurrency_limit"] == [({}, 4.0)]
    count = {labels["phase"]: v for labels, v in found["perfbench_task_latency_seconds_count"]}
    assert count["measured"] == 32
    tokens_out = sum(s.tokens_out or 0 for s in samples if s.phase == "measured")
    out = [
        v
        for labels, v in found["perfbench_tokens_total"]
        if labels == {"phase": "measured", "direction": "out"}
    ]
    assert out == [tokens_out]
    assert found["perfbench_run_info"][0][0]["run_id"] == result.meta["id"]


def test_a_busy_port_is_a_clear_error_before_the_run() -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PerfbenchError, match=f"--metrics-port {port}: cannot listen"):
            Telemetry(port).open()


def test_the_grafana_board_reads_only_metrics_perfbench_exports() -> None:
    telemetry = Telemetry(_free_port())
    exported = set()
    for family in telemetry.registry.collect():
        exported |= {s.name for s in family.samples} | {family.name}
    exported |= {name + suffix for name in set(exported) for suffix in ("_bucket", "_total")}
    board = json.loads(BOARD.read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    assert len(exprs) >= 8
    for expr in exprs:
        names = set(re.findall(r"\bperfbench_[a-z0-9_]+", expr))
        assert names, expr
        assert names <= exported, (expr, names - exported)
