"""What the recording proxy adds (issue 24; asserts nothing): TTFT and end-to-end latency of
model calls through `perfbench proxy` minus the same calls made directly, at 8 and 64 in
flight, P50 and P99.

The mock server (50 ms TTFT, 40 tokens 5 ms apart) and the proxy run in child processes
pinned to core 1; the client, perfbench's own agent loop (`-t openai/mock --base-url …`), is
this process, pinned to core 0. Direct and proxied runs alternate three times at each level;
each figure is the median of the three runs' pooled percentiles.

Usage: python tests/bench/proxy_overhead.py [--quick] [--proxy-core N] [--levels 8,64]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from perfbench import api
from perfbench.spec import Plan, RunSpec, TargetSpec
from tests.helpers import mock_process, perfbench, served

PROFILE = (
    "ttft_ms: 50\nitl_ms: 5\noutput_chars: 160\nmodels: {sim: {tokens_per_char: {default: 0.25}}}\n"
)
CASE = "cases:\n  - {id: one, language: en, input: hello, timeout_s: 60}\n"
SERVER_CORES = {1}
# In flight, each level a figure: 8 and 64 unless --levels 1,8,… says otherwise.
LEVELS = (
    [int(n) for n in sys.argv[sys.argv.index("--levels") + 1].split(",")]
    if "--levels" in sys.argv
    else [8, 64]
)
# The proxy's core: with the mock by default (--proxy-core 0: with the client instead).
PROXY_CORES = (
    {int(sys.argv[sys.argv.index("--proxy-core") + 1])} if "--proxy-core" in sys.argv else {1}
)


def proxy_process(mock_url: str) -> AbstractContextManager[str]:
    cmd = perfbench("proxy", "--upstream", "openai/mock", "--base-url", f"{mock_url}/v1")
    return served(cmd, PROXY_CORES)


def measure(case: Path, base_url: str, concurrency: int, tasks: int, out: Path) -> dict[str, Any]:
    plan = Plan(runs=1, warmup=1, repeat=tasks, concurrency=concurrency)
    target = TargetSpec("openai/mock", base_url=base_url)
    result = api.run(RunSpec.build([case], target, plan, out=out), interruptible=False)
    overall = result.summary["pooled"]["overall"]
    assert overall["ok"] == tasks, overall["failures"]
    return {
        "ttft_p50": overall["request_ttft"]["p50"],
        "ttft_p99": overall["request_ttft"]["p99"],
        "e2e_p50": overall["latency"]["p50"],
        "e2e_p99": overall["latency"]["p99"],
    }


def main() -> None:
    quick = "--quick" in sys.argv
    os.sched_setaffinity(0, {0})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "timed.yaml").write_text(PROFILE)
        case = folder / "case.yaml"
        case.write_text(CASE)
        with (
            mock_process(folder / "timed.yaml", cpus=SERVER_CORES) as mock_url,
            proxy_process(mock_url) as proxied,
        ):
            for level in LEVELS:
                tasks = max(80, level * 4) if quick else max(240, level * 12)
                sides: dict[str, list[dict[str, Any]]] = {"direct": [], "proxy": []}
                for _ in range(1 if quick else 3):
                    for side, url in (("direct", f"{mock_url}/v1"), ("proxy", proxied)):
                        sides[side].append(measure(case, url, level, tasks, folder / "runs"))
                report(level, sides)


def report(level: int, sides: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n{level} in flight (median of {len(sides['direct'])} runs each; ms)")
    print(f"{'figure':<10}{'direct':>10}{'proxy':>10}{'added':>10}")
    for key in ("ttft_p50", "ttft_p99", "e2e_p50", "e2e_p99"):
        direct = statistics.median(r[key] for r in sides["direct"]) * 1e3
        proxy = statistics.median(r[key] for r in sides["proxy"]) * 1e3
        print(f"{key:<10}{direct:>10.2f}{proxy:>10.2f}{proxy - direct:>+10.2f}")
    each = ", ".join(f"{r['ttft_p50'] * 1e3:.2f}" for r in sides["proxy"])
    print(f"proxy ttft_p50 per run: {each}")


if __name__ == "__main__":
    main()
