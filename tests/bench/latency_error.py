"""The HTTP client's own cost and distortion against the mock server (`make bench`).

The mock server runs in a child process; client and server share this machine's cores. Prints, for
64 and 256 tasks in flight, how far the measured TTFT, inter-token gap and end-to-end latency
are from what the profile dictates (one model call per task, no tools), then the client's CPU
per model call and the request rate one process sustains (short non-streaming replies, and
200-token streams, zero latency). Asserts nothing."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

from perfbench.recorder import Recorder
from perfbench.runner import Plan, Runner
from perfbench.sample import Sample
from perfbench.stats import Summarizer
from perfbench.suite import load_suite
from perfbench.targets.agent import ModelAgent
from perfbench.targets.openai_chat import OpenAIChat

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conftest import mock_process

TIMED = (
    "ttft_ms: 50\nitl_ms: 5\noutput_chars: 160\nmodels: {sim: {tokens_per_char: {default: 0.25}}}\n"
)
ZERO = (
    "ttft_ms: 0\nitl_ms: 0\noutput_chars: {chars}\n"
    "models: {{sim: {{tokens_per_char: {{default: 0.25}}}}}}\n"
)
CASE = "cases:\n  - {id: one, language: en, input: hello, timeout_s: 60}\n"
TRUE_E2E = 0.050 + 39 * 0.005  # 40 tokens


def run(
    url: str, suite_dir: Path, concurrency: int, repeat: int, stream: bool
) -> tuple[list[Sample], float, float]:
    suite = load_suite([suite_dir / "s.yaml"])
    samples: list[Sample] = []

    async def go() -> tuple[float, float]:
        agent = ModelAgent(
            OpenAIChat("m"),
            url + "/v1",
            name="bench",
            stream=stream,
            concurrency=concurrency,
            seed_headers=True,
        )
        recorder = Recorder(Summarizer({"one": 60.0}), observers=[samples.append])
        plan = Plan(runs=1, warmup=1, repeat=repeat, concurrency=concurrency)
        wall, cpu = time.perf_counter(), time.process_time()
        await Runner(suite, agent, plan, recorder).run()
        await agent.aclose()
        return time.perf_counter() - wall, time.process_time() - cpu

    wall, cpu = anyio.run(go, backend_options={"use_uvloop": True})
    return [s for s in samples if s.phase == "measured"], wall, cpu


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def errors(tmp: Path) -> None:
    (tmp / "timed.yaml").write_text(TIMED)
    for n in (64, 256):
        with mock_process(tmp / "timed.yaml") as url:  # a fresh server: its /stats per level
            samples, _, _ = run(url, tmp, n, n * 2, stream=True)
            late = httpx.get(url + "/stats").json()["lateness"]
        ttft = [(s.ttft or 0) - 0.050 for s in samples]
        itl = [(s.itl_mean or 0) - 0.005 for s in samples]
        e2e = [s.latency - TRUE_E2E for s in samples]
        print(
            f"{n} in flight ({len(samples)} tasks): error median/P99 — TTFT "
            f"{statistics.median(ttft) * 1e3:+.2f}/{pct(ttft, 99) * 1e3:+.2f} ms, gap "
            f"{statistics.median(itl) * 1e3:+.2f}/{pct(itl, 99) * 1e3:+.2f} ms, e2e "
            f"{statistics.median(e2e) * 1e3:+.2f}/{pct(e2e, 99) * 1e3:+.2f} ms; the server's own "
            f"write lateness P50/P99 {late['p50_ms']:.2f}/{late['p99_ms']:.2f} ms"
        )


def ceiling(tmp: Path) -> None:
    for label, chars, stream in (
        ("short non-streaming", 40, False),
        ("200-token streams", 800, True),
    ):
        profile = tmp / f"zero{chars}.yaml"
        profile.write_text(ZERO.format(chars=chars))
        with mock_process(profile) as url:
            samples, wall, cpu = run(url, tmp, 64, 1500 if stream else 3000, stream=stream)
        ok = sum(s.status == "ok" for s in samples)
        print(
            f"{label}, 64 in flight: {ok / wall:,.0f} calls/s, client CPU "
            f"{cpu / (ok * 2) * 1e3:.2f} ms per call (warmup included in CPU, halved)"
        )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "s.yaml").write_text(CASE)
        errors(Path(tmp))
        ceiling(Path(tmp))


if __name__ == "__main__":
    main()
