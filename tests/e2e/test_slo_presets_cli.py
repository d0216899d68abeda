"""Issue 42 item 1 end to end: `--slo mlperf:llama2-70b:interactive` against a mock whose
TTFT is 600 ms says the preset was missed and why; `slo list` cites the sources; a limit
without a unit is a usage error (issue 37 item 11)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import CASES, invoke

PROFILE = """name: ttft600
description: TTFT 600 ms on every request, 10 ms between tokens.
ttft_ms: 600
itl_ms: 10
output_chars: 40
models:
  sim: {tokens_per_char: {default: 0.25}}
"""


def test_a_preset_missed_on_ttft_is_said_with_its_p99_and_early_stopping(tmp_path: Path) -> None:
    profile = tmp_path / "ttft600.yaml"
    profile.write_text(PROFILE, encoding="utf-8")
    done = invoke("run", str(CASES / "answer.yaml"), "-t", f"mock:{profile}", "--slo",
               "mlperf:llama2-70b:interactive", "--runs", "1", "--warmup", "0", "-c", "8",
               "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "SLO mlperf:llama2-70b:interactive: MISSED (TTFT P99 6" in said
    assert "over 450.0 ms)" in said
    assert "TPOT P99" in said and "(limit 40.0 ms, ok)" in said
    assert "early-stopping P99 (99% confidence): none: needs 662 requests, has 4" in said
    (run_dir,) = (tmp_path / "runs").iterdir()
    good = json.loads((run_dir / "summary.json").read_text())["pooled"]["overall"]["goodput"]
    assert [c["met"] for c in good["objectives"]] == [False, True]


def test_slo_list_names_each_preset_with_its_source() -> None:
    done = invoke("slo", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("mlperf:llama2-70b:interactive: ttft ≤ 450 ms, tpot ≤ 40 ms at P99")
    assert "llama2-70b-interactive.Server.ttft_latency = 450" in lines[at + 1]
    assert lines[at + 2].strip().startswith("https://github.com/mlcommons/inference/blob/")
    assert any(line.startswith("guidellm:chat: ttft ≤ 200 ms, tpot ≤ 50 ms") for line in lines)


def test_a_limit_without_a_unit_is_a_usage_error(tmp_path: Path) -> None:
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock", "--slo", "ttft<500",
               "--out", str(tmp_path))  # fmt: skip
    said = " ".join(done.stderr.replace("│", " ").split())
    assert done.returncode == 2 and "give the limit a unit, as in ttft<500ms or ttft<500s" in said
