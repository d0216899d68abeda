"""perfbench's streamed tokens per CPU-second against Locust's FastHttpUser (issue 26; `make
bench-locust`, asserts nothing).

1,000-token streams at 16 in flight from `perfbench mock serve` (zero latency, pinned to core
1), each client pinned to core 0 and alternated three times in one sitting, medians:

- perfbench: one worker, the real run (client_figures.perfbench_run), CPU per stream over its
  warmup and measured passes (getrusage);
- Locust: `locust --headless` with 16 FastHttpUsers (gevent, geventhttpclient) that post the
  same request with ``stream=True``, split the body into lines and decode each event's JSON
  (the stdlib's, as Locust's own ``iter_lines`` users do) to count its tokens. CPU and tokens
  are counted inside the Locust process between its test_start and test_stop events, so its
  start-up is left out.

Locust is not one of perfbench's packages: it runs from its own virtual environment,
``--python PATH`` (make bench-locust builds .venv-locust with `pip install locust`).

Usage: python tests/bench/locust_streams.py --python .venv-locust/bin/python [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench.client_cost import CLIENT, SERVER, measured
from tests.bench.client_figures import BODY, CASE, LONG, perfbench_run
from tests.helpers import mock_process

IN_FLIGHT = 16
TOKENS = 1000  # a stream's: LONG's 4,000 characters at 4 a token

LOCUSTFILE = """
import json, os, time
import gevent
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser

BODY = {body}
LIMIT = int(os.environ["STREAMS"])
state = {{"tokens": 0, "streams": 0, "cpu": 0.0, "wall": 0.0}}


@events.test_start.add_listener
def started(environment, **kwargs):
    state["cpu"], state["wall"] = time.process_time(), time.monotonic()


@events.test_stop.add_listener
def stopped(environment, **kwargs):
    if state.get("stopped"):  # Locust may fire test_stop twice (quit, then exit)
        return
    state["stopped"] = True
    state["cpu"] = time.process_time() - state["cpu"]
    state["wall"] = time.monotonic() - state["wall"]
    with open(os.environ["OUT"], "w") as out:
        json.dump(state, out)


class Streams(FastHttpUser):
    wait_time = constant(0)

    @task
    def stream(self):
        if state["streams"] >= LIMIT:  # stop from a greenlet of its own, not this user's
            gevent.spawn(self.environment.runner.quit)
            raise StopUser()
        state["streams"] += 1
        headers = {{"content-type": "application/json"}}
        response = self.client.post("/v1/chat/completions", data=BODY, headers=headers,
                                    stream=True)
        buffer = b""
        for chunk in response.iter_content(chunk_size=65536, decode_content=False):
            buffer += chunk
            *lines, buffer = buffer.split(b"\\n")
            for line in lines:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    delta = json.loads(line[6:])["choices"][0]["delta"]
                    state["tokens"] += 1 if delta.get("content") else 0
"""


def locust(python: str, folder: Path, url: str, streams: int) -> tuple[float, float]:
    """One Locust run of ``streams`` streams: tokens per CPU-second and per wall second."""
    file = folder / "locustfile.py"
    file.write_text(LOCUSTFILE.format(body=repr(json.dumps({**BODY, "stream": True}))))
    out = folder / "locust.json"
    env = {**os.environ, "STREAMS": str(streams), "OUT": str(out)}
    cmd = ["taskset", "-c", ",".join(map(str, CLIENT)), python, "-m", "locust", "-f", str(file),
           "--headless", "-u", str(IN_FLIGHT), "-r", str(IN_FLIGHT), "--host", url,
           "--only-summary", "--skip-log", "--exit-code-on-error", "0"]  # fmt: skip
    subprocess.run(cmd, env=env, check=True, timeout=600, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)  # fmt: skip
    state = json.loads(out.read_text())
    if state["tokens"] < TOKENS * streams * 0.99:
        sys.exit(f"Locust counted {state['tokens']} tokens of {TOKENS * streams}: void")
    return state["tokens"] / state["cpu"], state["tokens"] / state["wall"]


def ours(folder: Path, url: str, streams: int) -> tuple[float, float]:
    """One perfbench run (a warmup and a measured pass of ``streams``): tokens per CPU-second
    over both passes, and the measured pass's tokens per second."""
    summary, spent = measured(
        lambda: perfbench_run(folder, "mock+http", IN_FLIGHT, streams, stream=True, url=url)
    )
    overall = summary["runs"][0]["overall"]
    return 2 * streams * TOKENS / spent, overall["output_tokens_per_s"]


def main() -> None:
    if "--python" not in sys.argv:
        sys.exit(__doc__)
    python = sys.argv[sys.argv.index("--python") + 1]
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two cores: the client on one, the mock server on the other")
    os.sched_setaffinity(0, CLIENT)
    streams = 200 if "--quick" in sys.argv else 600
    mine: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "case.yaml").write_text(CASE)
        (folder / "long.yaml").write_text(LONG)
        with mock_process(folder / "long.yaml", cpus=SERVER) as url:
            for _ in range(3):
                mine.append(ours(folder, url, streams))
                theirs.append(locust(python, folder, url, streams))
    for name, values in (("perfbench", mine), ("Locust FastHttpUser", theirs)):
        each = ", ".join(f"{cpu:,.0f}" for cpu, _ in values)
        print(f"{name}: {statistics.median(v[0] for v in values):,.0f} tokens per CPU-second "
              f"({each}); {statistics.median(v[1] for v in values):,.0f} tokens/s")  # fmt: skip
    ratio = statistics.median(m[0] / t[0] for m, t in zip(mine, theirs, strict=True))
    print(f"1,000-token streams, {IN_FLIGHT} in flight: perfbench / Locust per CPU-second "
          f"{ratio:.2f} (median of 3 pairs)")  # fmt: skip


if __name__ == "__main__":
    main()
