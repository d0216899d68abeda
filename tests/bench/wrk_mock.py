"""Mock server throughput under wrk (`make bench`): short non-streaming requests per second at
64 connections, and streamed tokens per second at 16 streams of 1,000 tokens. The server is
pinned to CPU 1 and wrk to CPU 0, so each has one core. Prints figures; asserts nothing.

Needs `wrk` (Debian: apt-get install wrk) and `taskset` (util-linux)."""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from perfbench.mock.server import command

SHORT = '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
STREAM = '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true}'
PROFILE = """name: wrk
ttft_ms: 0
itl_ms: 0
output_chars: {chars}
models: {{sim: {{tokens_per_char: {{default: 0.25}}}}}}
"""


def lua(body: str) -> str:
    return (
        'wrk.method = "POST"\n'
        f"wrk.body = '{body}'\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
    )


def serve(profile: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = ["taskset", "-c", "1", *command(str(profile))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def wrk(url: str, script: Path, connections: int, seconds: int = 8) -> float:
    cmd = [
        "taskset",
        "-c",
        "0",
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "-s",
        str(script),
        url + "/v1/chat/completions",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not found or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk run failed or saw errors:\n{out}")
    return float(found.group(1))


def measure(tmp: Path, chars: int, body: str, connections: int) -> list[float]:
    profile = tmp / f"p{chars}.yaml"
    profile.write_text(PROFILE.format(chars=chars))
    script = tmp / f"s{chars}.lua"
    script.write_text(lua(body))
    proc, url = serve(profile)
    try:
        return [wrk(url, script, connections) for _ in range(3)]
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    if not (shutil.which("wrk") and shutil.which("taskset")):
        print("mock server benchmark skipped: needs wrk and taskset (apt-get install wrk)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        short = measure(Path(tmp), 40, SHORT, 64)
        streams = measure(Path(tmp), 4000, STREAM, 16)
    print(
        f"mock server, short non-streaming requests at 64 connections: "
        f"{statistics.median(short):,.0f} req/s (runs: {', '.join(f'{r:,.0f}' for r in short)})"
    )
    tokens = [r * 1000 for r in streams]
    print(
        f"mock server, 16 streams of 1,000 tokens: {statistics.median(tokens):,.0f} tokens/s "
        f"(runs: {', '.join(f'{t:,.0f}' for t in tokens)})"
    )


if __name__ == "__main__":
    main()
