"""`run --synthetic SPEC` (issue 23 item 1): generated prompts run as ordinary cases, and the
output-length contract: servers that take min_tokens/ignore_eos (self-hosted, the mock) produce
exactly the length asked; a run whose server did not is warned about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench.apis.openai_chat import OpenAIChat
from perfbench.suite import Case
from perfbench.targets.registry import resolve
from perfbench.targets.target_spec import TargetSpec
from tests.helpers import invoke

SPEC = "input=64,output=24,n=6,seed=3"
WARNING = "cases got another output length than they asked"


def _samples(out: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    (run_dir,) = [d for d in out.iterdir() if (d / "meta.json").exists()]
    meta = json.loads((run_dir / "meta.json").read_text())
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    return meta, [json.loads(line) for line in lines]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_mock_server_produces_exactly_the_output_asked(tmp_path: Path, api: str) -> None:
    """Over the Responses API the mock answered 36 of 128 tokens asked, and the warning blamed
    "the server": the length was never asked (max_output_tokens) and the mock took no extras."""
    done = invoke("run", "--synthetic", SPEC, "-t", "mock+http", "--api", api, "--runs", "1",
               "--warmup", "0", "--out", str(tmp_path), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    meta, samples = _samples(tmp_path)
    assert meta["spec"]["cases"] == [f"synthetic:{SPEC}"]  # a worker or --resume regenerates
    assert len(samples) == 6 and {s["tokens_out"] for s in samples} == {24}
    assert WARNING not in done.stdout + done.stderr


def test_a_server_that_ignores_the_length_is_warned_about(tmp_path: Path) -> None:
    # The in-process mock answers with its profile's lengths, as a hosted API ends its answer.
    done = invoke("run", "--synthetic", SPEC, "-t", "mock", "--runs", "1", "--warmup", "0",
               "--out", str(tmp_path), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    _, samples = _samples(tmp_path)
    assert {s["tokens_out"] for s in samples} != {24}
    said = " ".join((done.stdout + done.stderr).split())
    assert WARNING in said and "the in-process mock (-t mock)" in said
    assert "the server did not honour" not in said


def test_only_self_hosted_servers_get_the_extras() -> None:
    case = Case(id="c", input="hi", output_tokens=24, max_tokens=24)
    hosted, served = OpenAIChat("m"), OpenAIChat("m", extras=True)
    assert hosted.request(case, [], True)[1]["max_tokens"] == 24
    assert "min_tokens" not in hosted.request(case, [], True)[1]  # OpenAI answers 400 to it
    body = served.request(case, [], True)[1]
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (24, 24, True)
    apis = {
        url: resolve(TargetSpec("openai/m", base_url=url, api_key_env="HOME")).api  # type: ignore[attr-defined]
        for url in ("https://api.openai.com/v1", "http://127.0.0.1:8000/v1")
    }
    assert [a.extras for a in apis.values()] == [False, True]
