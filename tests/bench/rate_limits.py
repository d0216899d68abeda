"""Rate limits against the real mock server (`make bench`; prints figures, asserts nothing).

1. `perfbench run --adaptive` with default options (in-task retries on) against the mock
   limited to 4 and to 16 concurrent requests (429 + Retry-After 1 s above that): the
   converged limit, three sittings each; the issue asks for ±25% of the server's limit.
2. `--adaptive` with default options against 600 requests per minute (10/s): the rate of
   successful tasks over the second half of the run; the issue asks for ±25% of the limit.
3. Against 60 requests per minute whose every refusal asks 60 s (a router's default): how long
   after the refusal each refused task ended, and the attempts the samples count against the
   requests the server saw (`GET /stats`).

Usage: python tests/bench/rate_limits.py [--sittings N]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers import CASES, mock_process, perfbench

MODEL = "models: {sim: {tokens_per_char: {default: 0.25}}}\n"
TIMING = "ttft_ms: 50\nitl_ms: 5\noutput_chars: 40\n"


def run(folder: Path, *args: str) -> Path:
    out = folder / "runs"
    before = set(out.iterdir()) if out.exists() else set()
    cmd = perfbench("run", str(CASES / "answer.yaml"), "--runs", "1", "--warmup", "0", "-q",
                    "--out", str(out), *args)  # fmt: skip
    subprocess.run(cmd, check=False, capture_output=True, timeout=600)
    [made] = set(out.iterdir()) - before
    return made


def converged(folder: Path, limit: int, sittings: int) -> None:
    profile = folder / f"c{limit}.yaml"
    profile.write_text(TIMING + MODEL + f"rate_limits: {{concurrent: {limit}}}\n")
    found = []
    for _ in range(sittings):
        run_dir = run(folder, "-t", f"mock+http:{profile}", "--adaptive", "--repeat", "150")
        summary = json.loads((run_dir / "summary.json").read_text())
        found.append(summary["adaptive"]["converged_limit"])
    shown = ", ".join(f"{v:.1f}" for v in found)
    inside = sum(0.75 * limit <= v <= 1.25 * limit for v in found)
    median = statistics.median(found)
    print(
        f"--adaptive, defaults, server admits {limit}: converged {shown} "
        f"(median {median:.1f}); within ±25%: {inside} of {len(found)}"
    )


def rpm_rate(folder: Path, sittings: int) -> None:
    profile = folder / "rpm600.yaml"
    profile.write_text(TIMING + MODEL + "rate_limits: {requests_per_minute: 600, burst_s: 1}\n")
    rates = []
    for _ in range(sittings):
        run_dir = run(folder, "-t", f"mock+http:{profile}", "--adaptive", "--repeat", "100")
        lines = (run_dir / "samples.jsonl").read_text().splitlines()
        ends = sorted(s["end"] for s in map(json.loads, lines) if s["status"] == "ok")
        half = ends[len(ends) // 2 :]
        rates.append((len(half) - 1) / (half[-1] - half[0]))
    shown = ", ".join(f"{v:.2f}" for v in rates)
    inside = sum(0.75 * 10 <= v <= 1.25 * 10 for v in rates)
    print(
        f"--adaptive, defaults, 600 rpm (10/s): ok tasks/s over the second half {shown}; "
        f"within ±25%: {inside} of {len(rates)}"
    )


def long_waits(folder: Path) -> None:
    profile = folder / "rpm60.yaml"
    profile.write_text(
        TIMING + MODEL + "rate_limits: {requests_per_minute: 60, retry_after_s: 60}\n"
    )
    with mock_process(profile) as url:
        run_dir = run(folder, "-t", "openai/mock", "--base-url", url + "/v1", "-c", "4",
                      "--repeat", "10")  # fmt: skip
        served = httpx.get(url + "/stats").json()
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    refused = [s for s in samples if s["status"] == "rate_limited"]
    after = [s["end"] - _answered(s["steps"][-1]) for s in refused]
    attempts = sum(1 + s["retries"] for s in samples)
    print(
        f"60 rpm, every refusal asking 60 s: {len(refused)} of {len(samples)} tasks refused, "
        f"ended {max(after) * 1e3:.1f} ms at most after their 429 arrived; retry_after "
        f"{sorted({s['retry_after'] for s in refused})}; attempts counted {attempts}, "
        f"completion requests the server saw {served['by_path']['/v1/chat/completions']}"
    )


def _answered(step: dict[str, float | None]) -> float:
    """When the step's (last) answer arrived: its start, its wait to send, its headers."""
    return float(step["start"] or 0) + float(step["wait"] or 0) + float(step["headers"] or 0)


def main() -> None:
    sittings = int(sys.argv[sys.argv.index("--sittings") + 1]) if "--sittings" in sys.argv else 3
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for limit in (4, 16):
            converged(folder, limit, sittings)
        rpm_rate(folder, sittings)
        long_waits(folder)


if __name__ == "__main__":
    main()
