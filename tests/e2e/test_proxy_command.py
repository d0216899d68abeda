"""`perfbench proxy`: the recording proxy on its own, for an agent started by hand. Its first
line on stdout is the base URL an OpenAI client takes (with /v1), the variables for an agent
on stderr; an agent pointed there gets its answers; Ctrl-C stops it and prints the calls'
timing table per model (--json: a line per call, then the table as JSON)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from perfbench.apis import recording
from tests.helpers import perfbench

AGENT = Path(__file__).resolve().parent.parent / "fixtures" / "agents" / "urllib_agent.py"


def _agent(base: str, token: str, model: str = "mock") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_BASE_URL": base, "OPENAI_API_KEY": token,
           "PERFBENCH_MODEL": model}  # fmt: skip
    return subprocess.run([sys.executable, str(AGENT)], input="hello", env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def _stop(proxy: subprocess.Popen[str]) -> tuple[str, str]:
    proxy.send_signal(signal.SIGINT)
    return proxy.communicate(timeout=20)


def test_an_agent_started_by_hand_goes_through_the_proxy() -> None:
    wide = {**os.environ, "COLUMNS": "200"}  # the table's rows on one line each
    with subprocess.Popen(perfbench("proxy"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=wide) as proxy:  # fmt: skip
        try:
            assert proxy.stdout is not None and proxy.stderr is not None
            base = proxy.stdout.readline().strip()
            assert base.startswith("http://127.0.0.1:") and "/t/" in base
            assert base.endswith("/v1")  # pasted as OPENAI_BASE_URL, it works as it is
            token = base.removesuffix("/v1").rsplit("/", 1)[1]
            agent = _agent(base, token, "gpt-a")
            assert agent.returncode == 0 and agent.stdout.strip(), agent.stderr
            assert _agent(base, token, "gpt-b").returncode == 0
            assert _agent(base, token, "gpt-a").returncode == 0
            wrong = base.replace(token, "0" * 32)
            refused = _agent(wrong, token)
            assert refused.returncode != 0 and "HTTP 401" in refused.stderr
        finally:
            table, said = _stop(proxy)
    assert proxy.returncode == 0, said
    assert f"export OPENAI_BASE_URL={base} " in said
    assert "perfbench proxy: 3 model calls, 0 failed." in said
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines()]
    rows = {row[0]: row for row in cells if row and row[0].startswith("gpt-")}
    assert rows["gpt-a"][1:3] == ["2", "0"] and rows["gpt-b"][1:3] == ["1", "0"]  # calls, failed
    assert "TTFT P50" in table and rows["gpt-a"][3].endswith("ms")  # a measured TTFT, not "–"


def test_port_record_and_json(tmp_path: Path) -> None:
    with socket.socket() as s:  # a free port, given back before the proxy takes it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    record = tmp_path / "calls.jsonl"
    cmd = perfbench("proxy", "--port", str(port), "--record", str(record), "--json")
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proxy:
        try:
            assert proxy.stdout is not None
            base = proxy.stdout.readline().strip()
            assert base.startswith(f"http://127.0.0.1:{port}/t/") and base.endswith("/v1")
            token = base.removesuffix("/v1").rsplit("/", 1)[1]
            assert _agent(base, token, "gpt-a").returncode == 0
            live = orjson.loads(proxy.stdout.readline())  # printed as the call ended
            assert live["event"] == "call" and live["model"] == "gpt-a"
            assert live["status"] == "ok" and live["ttft"] > 0 and live["tokens_out"] > 0
            assert live["finish"] == "stop"  # why the reply ended, as the API said it
        finally:
            rest, said = _stop(proxy)
    assert proxy.returncode == 0, said
    summary = orjson.loads(rest.strip().splitlines()[-1])
    assert summary["event"] == "summary" and summary["calls"] == 1
    model = summary["models"]["gpt-a"]
    assert model["calls"] == 1 and model["tokens_out"] == live["tokens_out"]
    assert model["ttft"]["p50"] == live["ttft"]
    header, calls = recording.read(record)
    assert header["upstream"] == "mock+http" and len(calls) == 1
    assert calls[0].case == "proxy" and calls[0].model == "gpt-a" and calls[0].status == 200


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run(perfbench("proxy", "--port", str(port)), capture_output=True,
                              text=True, timeout=60)  # fmt: skip
    assert done.returncode == 3 and f"127.0.0.1:{port}" in done.stderr
    assert "choose another --port" in done.stderr and "Traceback" not in done.stderr


def test_the_printed_url_works_as_the_official_sdks_base_url() -> None:
    """What a person does with the first line: the openai SDK's OPENAI_BASE_URL (Chat
    Completions, streamed and not, and the Responses API), and the export line's
    ANTHROPIC_BASE_URL for the anthropic SDK; each call in the table on exit."""
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    wide = {**os.environ, "COLUMNS": "200"}
    with subprocess.Popen(perfbench("proxy"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=wide) as proxy:  # fmt: skip
        try:
            assert proxy.stdout is not None and proxy.stderr is not None
            base = proxy.stdout.readline().strip()
            exports = dict(
                word.split("=", 1) for word in proxy.stderr.readline().split()[1:]
            )  # export A=… B=…
            assert exports["OPENAI_BASE_URL"] == base
            client = openai.OpenAI(base_url=base, api_key=exports["OPENAI_API_KEY"],
                                   max_retries=0, timeout=60)  # fmt: skip
            chat = [{"role": "user", "content": "When does my order ship?"}]
            reply = client.chat.completions.create(model="sdk-chat", messages=chat)
            assert reply.choices[0].message.content and reply.usage.completion_tokens > 0
            chunks = client.chat.completions.create(model="sdk-stream", messages=chat,
                                                    stream=True)  # fmt: skip
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            answer = client.responses.create(model="sdk-responses", input="hello")
            assert answer.output_text
            client.close()  # its pooled connection, else a ResourceWarning at collection
            claude = anthropic.Anthropic(base_url=exports["ANTHROPIC_BASE_URL"],
                                         api_key=exports["ANTHROPIC_API_KEY"], max_retries=0,
                                         timeout=60)  # fmt: skip
            message = claude.messages.create(model="sdk-claude", max_tokens=50, messages=chat)
            assert message.content[0].text  # type: ignore[union-attr]
            claude.close()
        finally:
            table, said = _stop(proxy)
    assert proxy.returncode == 0, said
    assert "4 model calls, 0 failed." in said
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines()]
    rows = {row[0]: row for row in cells if row and row[0].startswith("sdk-")}
    assert set(rows) == {"sdk-chat", "sdk-stream", "sdk-responses", "sdk-claude"}
    assert all(row[1:3] == ["1", "0"] for row in rows.values())
    assert rows["sdk-stream"][3].endswith("ms")  # the streamed call's TTFT


def test_the_proxy_starts_without_the_other_commands_modules() -> None:
    """A script waits on the proxy's first line: it imports its own command, not every one's
    (compare, the engine: about half its start-up on a loaded machine). Every command is still
    there for the rest of the command line."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "perfbench", "proxy",
                           "--help"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "--record" in done.stdout, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "perfbench.cli.app" in imported  # (importlib's imports are not in importtime's)
    assert not imported & {"perfbench.cli.compare", "perfbench.cli.run", "perfbench.cli.sweep"}
    listed = subprocess.run(perfbench("--help"), capture_output=True, text=True, timeout=120)
    assert all(name in listed.stdout for name in ("run", "compare", "proxy", "sweep"))
