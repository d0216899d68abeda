"""Where a key goes, and what of a URL is kept (issue 21, items 3, 4 and 12's --base-url): a
provider's key only to that provider's host, credentials in --base-url never recorded or
printed, and a --base-url that cannot work refused before the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web

from perfbench import api
from perfbench.errors import TargetError
from perfbench.spec import Plan, RunSpec, TargetSpec
from perfbench.targets.registry import resolve
from tests.helpers import cli, serving

CASE = "cases:\n  - {id: c, language: en, input: hi, timeout_s: 5}\n"
OK = {"choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 1}}  # fmt: skip


def _run(tmp_path: Path, target: TargetSpec) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "s.yaml").write_text(CASE)
    spec = RunSpec.build([tmp_path / "s.yaml"], target, Plan(runs=1, warmup=0),
                         out=tmp_path / "runs")  # fmt: skip
    result = api.run(spec, interruptible=False)
    assert result.run_dir is not None
    return result.run_dir


@pytest.fixture
def seen() -> list[dict[str, str]]:
    return []


@pytest.fixture
def url(seen: list[dict[str, str]]) -> object:
    async def answer(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response(OK)

    with serving(answer) as base:
        yield base


def test_a_providers_key_is_not_sent_to_another_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, seen: list[dict[str, str]]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-exported-for-openai-only-0000")
    monkeypatch.setenv("MY_VLLM_KEY", "vllm-key-named-by-the-user-1111")
    _run(tmp_path / "a", TargetSpec("openai/m", base_url=url + "/v1", stream=False))
    _run(tmp_path / "b", TargetSpec("openai/m", base_url=url + "/v1", stream=False,
                                    api_key_env="MY_VLLM_KEY"))  # fmt: skip
    assert "Authorization" not in seen[0]  # self-hosted: no key unless one is named
    assert seen[1]["Authorization"] == "Bearer vllm-key-named-by-the-user-1111"


def test_the_providers_own_host_still_gets_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-exported-for-openai-only-0000")
    agent = resolve(TargetSpec("openai/m", base_url="https://api.openai.com/v1"))
    assert "sk-exported-for-openai-only-0000" in agent.secrets


def test_credentials_in_the_base_url_are_never_recorded(
    tmp_path: Path, url: str, seen: list[dict[str, str]]
) -> None:
    with_credentials = url.replace("http://", "http://alice:s3cr3t-pass@") + "/v1?key=k-123456789"
    run = _run(tmp_path, TargetSpec("openai/m", base_url=with_credentials, stream=False))
    assert seen[0]["Authorization"].startswith("Basic ")  # they were used…
    kept = "".join(p.read_text() for p in run.rglob("*") if p.is_file())
    for secret in ("alice", "s3cr3t-pass", "k-123456789"):  # …and never written
        assert secret not in kept
    meta = json.loads((run / "meta.json").read_text())
    assert meta["spec"]["target"]["base_url"] == url + "/v1?key=***"


def test_a_connect_error_names_the_url_without_its_credentials(tmp_path: Path) -> None:
    run = _run(tmp_path, TargetSpec("openai/m", base_url="http://bob:hunter2-pw@127.0.0.1:9/v1",
                                    retries=0, preflight=False))  # fmt: skip
    [sample] = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert sample["error_kind"] == "connect_error"
    assert "127.0.0.1:9" in sample["error"] and "hunter2" not in sample["error"]
    assert "bob" not in sample["error"]


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("http://127.0.0.1:99999/v1", "Port out of range"),
        ("ftp://127.0.0.1/v1", "expected http://host"),
        ("127.0.0.1:8000/v1", "expected http://host"),
        ("http://:8000/v1", "expected http://host"),
    ],
)
def test_a_base_url_that_cannot_work_is_refused_before_the_run(
    tmp_path: Path, base_url: str, says: str
) -> None:
    with pytest.raises(TargetError, match=says):
        resolve(TargetSpec("openai/m", base_url=base_url))
    (tmp_path / "s.yaml").write_text(CASE)
    done = cli("run", str(tmp_path / "s.yaml"), "-t", "openai/m", "--base-url", base_url,
               "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "--base-url" in done.stderr and "Traceback" not in done.stderr
