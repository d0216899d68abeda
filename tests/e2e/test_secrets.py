"""No key on disk: a key planted in the environment, echoed by a loopback server in every way a
server can (error bodies, escaped, past the excerpt's cut, SSE error events, 200 bodies that are
not JSON, malformed HTTP: a bad status line, huge headers, a bad chunk size; a model's name, a
tool's name), never reaches the run folder, `show`, a report, an export or the console: no run
of more than 4 of its characters (issue 21, items 1–2). The real executable, real sockets."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from perfbench.http.redact import Redactor
from tests.helpers import cli, invoke, serving_raw

KEY = "sk-pq-Zq8vW3nKp5Lm2Rt7Yx9Bc4Df6Gh1Jk0"
ENV = "PB_TEST_SECRET_KEY"


def _http(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
    return f"{head}content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body


def _sse(*events: dict[str, object]) -> bytes:
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return _http("200 OK", data + b"data: [DONE]\n\n", "text/event-stream")


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _error(message: str) -> bytes:
    return ('{"error": {"message": "' + message + '"}}').encode()


def _chunk(content: str, model: str = "m") -> dict[str, object]:
    return {"model": model, "choices": [{"delta": {"content": content}, "finish_reason": None}]}


# What the server answers for each case's input: the key, as it echoes it.
ANSWERS: dict[str, Callable[[bytes], bytes]] = {
    "e401": lambda req: _http("401 Unauthorized", _error(f"Incorrect API key provided: {KEY}")),
    "dash-escaped": lambda req: _http("401 Unauthorized", _error(KEY.replace("-", "\\u002d"))),
    "all-escaped": lambda req: _http("403 Forbidden", _error(_escaped(KEY))),
    "past-the-cut": lambda req: _http("500 Oops", _error("x" * 260 + KEY)),
    "headers-echoed": lambda req: _http("500 Oops", req, "text/plain"),
    "sse-error": lambda req: _sse({"error": {"message": f"bad key {KEY}"}}),
    "not-json-200": lambda req: _http("200 OK", f"hello {KEY}".encode(), "text/plain"),
    "bad-status": lambda req: f"HTTP/1.1 2xx {KEY}\r\n\r\n".encode(),
    "huge-header": lambda req: b"HTTP/1.1 200 OK\r\nx-echo: " + KEY.encode() * 400 + b"\r\n\r\n",
    "bad-chunk": lambda req: (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + KEY.encode() + b"\r\n"
    ),
    "model-name": lambda req: _sse(_chunk("hi", model=KEY), {"choices": [], "usage": None}),
}


async def _answer(request: bytes) -> bytes:
    for mode, answer in ANSWERS.items():
        if f'"mode {mode}"'.encode() in request:
            return answer(request)
    return _http("400 Bad Request", _error("no mode"))


def _cases(path: Path) -> Path:
    lines = [f"  - {{id: {mode}, language: en, input: 'mode {mode}', timeout_s: 5}}"
             for mode in ANSWERS]  # fmt: skip
    path.write_text("cases:\n" + "\n".join(lines) + "\n")
    return path


def _runs_of_key(text: str) -> list[str]:
    """Every run of 5 characters of the key found in ``text``, as written or with its
    ``\\uXXXX`` escapes (however many backslashes a JSON writer added) decoded."""
    decoded = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    runs = {KEY[i : i + 5] for i in range(len(KEY) - 4)}
    return sorted(r for r in runs if r in text or r in decoded)


def _everything_under(folder: Path) -> str:
    texts = []
    for path in folder.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


# The first case runs the real executable for each of its five commands (what a process
# writes to its console, outside typer's capture, is checked there); the others run them in
# this process (tests.helpers.invoke): a child interpreter costs 10 s at load 14, and the key's
# redaction is the same code whichever process runs it.
@pytest.mark.parametrize(
    ("target", "extra", "perfbench"),
    [
        ("openai/m", ("--api-key-env", ENV), cli),
        ("anthropic/claude-x", ("--api-key-env", ENV), invoke),
        ("openai/m", ("-H", f"x-api-key: ${{{ENV}}}", "--no-stream"), invoke),
    ],
    ids=["openai-bearer", "anthropic-x-api-key", "header-no-stream"],
)
def test_no_part_of_an_echoed_key_is_kept_anywhere(
    tmp_path: Path,
    target: str,
    extra: tuple[str, ...],
    perfbench: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    env = {**os.environ, ENV: KEY}
    suite = _cases(tmp_path / "cases.yaml")
    runs, reports = tmp_path / "runs", tmp_path / "reports"
    with serving_raw(_answer) as url:
        base = url + "/v1" if target.startswith("openai") else url
        ran = perfbench("run", str(suite), "-t", target, "--base-url", base, *extra,
                        "--runs", "1", "--warmup", "0", "--retries", "0", "--out", str(runs),
                        env=env)  # fmt: skip
    assert ran.returncode in (0, 4, 5, 6, 8), ran.stderr  # a finished run, not a traceback
    assert "Traceback" not in ran.stderr
    [run] = [p for p in runs.iterdir() if p.is_dir()]
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == len(ANSWERS)
    assert all(s["error_kind"] is None or not s["error_kind"].startswith("unhandled")
               for s in samples), [s["error"] for s in samples]  # fmt: skip
    outputs = [ran.stdout, ran.stderr]
    for args in (("show", str(run)), ("report", str(run), "--out", str(reports)),
                 ("export", str(run), "-f", "csv", "-o", str(tmp_path / "s.csv")),
                 ("export", str(run), "-f", "json", "-o", str(tmp_path / "s.jsonl"))):  # fmt: skip
        done = perfbench(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        outputs += [done.stdout, done.stderr]
    kept = "\n".join([_everything_under(tmp_path), *outputs])
    assert _runs_of_key(kept) == []
    # The failures are still told apart: the server's words minus the key.
    errors = {s["case"]: s["error"] or "" for s in samples}
    assert "Incorrect API key provided: ***" in errors["e401"]
    assert "***" in errors["past-the-cut"] and errors["past-the-cut"].count("x") > 250


def test_a_cut_prefix_an_escaped_copy_and_a_suffix_are_all_masked() -> None:
    redact = Redactor.of_request("http://h/v1", {"authorization": f"Bearer {KEY}"})
    for text in (f"key {KEY[:12]}", f"e {KEY.replace('-', chr(92) + 'u002d')}", f"…{KEY[-9:]}",
                 "%73%6B%2D" + KEY[3:10], _escaped(KEY)):  # fmt: skip
        assert _runs_of_key(redact(text)) == [], text
    assert redact("Bearer token rejected") == "Bearer token rejected"  # no secret in prose
