"""`run --scenario mlperf-server` end to end (issue 42 item 3): a short run is stamped INVALID
in the console and summary.json, naming the rule; the scenario's needs are usage errors."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import CASES, invoke


def test_a_short_server_scenario_run_is_stamped_invalid(tmp_path: Path) -> None:
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock", "--scenario", "mlperf-server",
               "--slo", "mlperf:llama2-70b:server", "--rate", "20", "--duration", "1",
               "--warmup", "0", "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    at = lines.index("scenario mlperf-server: INVALID")
    failed = " ".join(lines[at + 1 : at + 6])
    assert "queries in the smallest run; the rule asks 100" in failed
    assert "the rule asks 600 s" in failed
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    stamp = summary["scenario"]
    assert stamp["name"] == "mlperf-server" and not stamp["valid"]
    rules = {r["rule"]: r["ok"] for r in stamp["rules"]}
    assert rules["arrivals"] and not rules["min_query_count"] and not rules["min_duration"]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["spec"]["scenario"] == "mlperf-server"
    assert meta["spec"]["plan"]["load"]["arrival"] == "poisson"
    assert meta["spec"]["plan"]["runs"] == 1  # the scenario's one run, unless --runs says
    report = invoke("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert ": scenario mlperf-server: INVALID" in text and "  - min_query_count: " in text
    # the early-stopping P99s beside the raw ones, or what an estimate needs (issue 42 item 2)
    assert "early-stopping P99 (99% confidence, runs pooled): latency none: needs 662 tasks" in text
    (run_dir / "summary.json").unlink()  # killed before writing it: stamped again
    shown = invoke("show", str(run_dir))
    assert shown.returncode == 0 and "scenario mlperf-server: INVALID" in shown.stdout


def test_the_scenario_needs_a_rate_and_a_preset(tmp_path: Path) -> None:
    base = ["run", str(CASES / "answer.yaml"), "-t", "mock", "--scenario", "mlperf-server",
            "--out", str(tmp_path)]  # fmt: skip
    no_rate = invoke(*base, "--slo", "mlperf:llama2-70b:server")
    said = " ".join(no_rate.stderr.replace("│", " ").split())
    assert no_rate.returncode == 2 and "give their rate, --rate R" in said
    no_slo = invoke(*base, "--rate", "5")
    said = " ".join(no_slo.stderr.replace("│", " ").split())
    assert no_slo.returncode == 2 and "add --slo mlperf:MODEL:server" in said
