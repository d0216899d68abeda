"""`perfbench verify` (issue 42 item 4): the built-in mock passes; a server whose usage
overstates prompt tokens by 20% fails on that row, and one that streams in one burst fails
on streaming, while the same server telling the truth passes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from perfbench.stats import tokens
from tests.helpers import invoke, serving

ANSWER = ["word "] * 12  # 12 tokens by the test server's tokenizer: one a word


def _words(text: str) -> int:
    return len(text.split())


def _o200k(text: str) -> int:
    return tokens.count(text, "o200k_base")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _server(overstate: float, burst: bool, count: Callable[[str], int] = _words) -> Handler:
    """An OpenAI-compatible chat server whose tokenizer is ``count`` (words: with a
    /tokenize; o200k: without one, as OpenAI's API); its usage counts the prompt times
    ``overstate`` (plus 3 template tokens)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if request.path == "/tokenize":
            if count is not _words:
                raise web.HTTPNotFound()
            return web.json_response({"count": count(body["prompt"])})
        prompt = body["messages"][-1]["content"]
        usage = {"prompt_tokens": round(count(prompt) * overstate) + 3,
                 "completion_tokens": count("".join(ANSWER))}  # fmt: skip
        if not body.get("stream"):
            message = {"role": "assistant", "content": "".join(ANSWER)}
            return web.json_response({"choices": [{"message": message}], "usage": usage})
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        events = [{"choices": [{"delta": {"content": w}}]} for w in ANSWER]
        lines = [f"data: {json.dumps(e)}\n\n" for e in [*events, {"choices": [], "usage": usage}]]
        lines.append("data: [DONE]\n\n")
        if burst:  # every chunk in one write: what a server that buffers its stream sends
            await resp.write("".join(lines).encode())
        else:
            for line in lines:
                await resp.write(line.encode())
                await asyncio.sleep(0.003)
        await resp.write_eof()
        return resp

    return handle


def _verify(url: str, model: str = "llama-test") -> tuple[int, dict[str, str], str]:
    done = invoke("verify", "-t", f"openai/{model}", "--base-url", f"{url}/v1", "--json")
    doc = json.loads(done.stdout)
    return done.returncode, {c["key"]: c["verdict"] for c in doc["checks"]}, done.stderr


def test_verify_against_the_built_in_mock_passes() -> None:
    done = invoke("verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify: every judged figure is within its bar" in " ".join(done.stdout.split())
    doc = json.loads(invoke("verify", "--json").stdout)
    verdicts = {c["key"]: c["verdict"] for c in doc["checks"]}
    assert doc["passed"] and "fail" not in verdicts.values()
    judged = ("input_tokens", "output_tokens_asked", "output_tokens_counted", "streaming",
              "stream_usage", "clock_skew")  # fmt: skip
    assert all(verdicts[k] == "pass" for k in judged), verdicts  # the mock offers /tokenize
    assert verdicts["prices"] == "info"


@pytest.mark.parametrize(("overstate", "burst", "failing"), [
    (1.0, False, []),
    (1.2, False, ["input_tokens"]),
    (1.0, True, ["streaming"]),
])  # fmt: skip
def test_a_server_past_a_bar_fails_naming_that_row(
    overstate: float, burst: bool, failing: list[str]
) -> None:
    with serving(_server(overstate, burst)) as url:
        code, verdicts, stderr = _verify(url)
    assert code == (5 if failing else 0), (verdicts, stderr)
    assert sorted(k for k, v in verdicts.items() if v == "fail") == failing
    assert verdicts["output_tokens_asked"] == "pass" and verdicts["stream_usage"] == "pass"
    assert verdicts["template_overhead"] == "info" and verdicts["offline_estimate"] == "info"


def test_the_table_names_the_failed_row() -> None:
    with serving(_server(1.2, False)) as url:
        done = invoke("verify", "-t", "openai/llama-test", "--base-url", f"{url}/v1")
    said = " ".join(done.stdout.split())
    assert done.returncode == 5
    assert "verify: failed: input tokens: usage vs the server's /tokenize" in said


@pytest.mark.parametrize(("overstate", "failing"), [(1.0, []), (1.2, ["input_tokens"])])
def test_without_tokenize_an_openai_model_is_judged_by_the_offline_tokenizer(
    overstate: float, failing: list[str]
) -> None:
    with serving(_server(overstate, False, _o200k)) as url:
        code, verdicts, stderr = _verify(url, "gpt-4o")
    assert code == (5 if failing else 0), (verdicts, stderr)
    assert sorted(k for k, v in verdicts.items() if v == "fail") == failing
    assert verdicts["output_tokens_counted"] == "pass"
    with serving(_server(1.2, False, _o200k)) as url:  # another family: o200k is a proxy
        code, verdicts, _ = _verify(url, "llama-test")
    assert code == 0 and verdicts["input_tokens"] == "info"
