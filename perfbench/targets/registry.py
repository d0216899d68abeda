"""Target strings → targets. Adding a hosted provider is one ``Provider`` entry.

mock | mock:<profile>[@model]        in-process mock agent (tests, overhead)
mock+http | mock+http:<profile>[@model]  mock server in a child process, over real HTTP
<provider>/<model>                   a hosted model in the built-in agent loop
openai/<model> --base-url URL        any OpenAI-compatible server (vLLM, Ollama, LiteLLM)
http+agent://host/path               a user's agent behind an HTTP endpoint (http+agents:// for TLS)
python:package.module:function       a user's async callable
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from typing import Literal

from perfbench.errors import TargetError
from perfbench.targets import Target
from perfbench.targets.chat import ChatApi
from perfbench.targets.retry import RetryPolicy


@dataclass(frozen=True)
class Provider:
    api: Literal["openai", "anthropic"]
    base_url: str
    key_env: str


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": Provider("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY"),
    "deepseek": Provider("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "qwen": Provider(
        "openai", "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"
    ),
    "zhipu": Provider("openai", "https://open.bigmodel.cn/api/paas/v4", "ZHIPU_API_KEY"),
}


@dataclass(frozen=True)
class TargetOptions:
    base_url: str | None = None
    api_key_env: str | None = None
    stream: bool = True
    concurrency: int = 1  # connections per target: tasks that can be in flight; 0 = no limit
    seed: int = 0
    retries: int = 3
    check_tokens: bool = False  # also count output tokens offline when the API reports usage
    # mock+http in a worker process: the parent's mock server, instead of starting another.
    server_url: str | None = None


def resolve(spec: str, options: TargetOptions | None = None) -> Target:
    options = options or TargetOptions()
    if spec.startswith("mock"):
        return _mock(spec, options)
    kind, _, arg = spec.partition(":")
    if kind == "python":
        from perfbench.targets.python_callable import PythonCallable

        return PythonCallable(arg)
    if kind in ("http+agent", "http+agents"):
        from perfbench.targets.http_agent import HttpAgent

        scheme = "https" if kind == "http+agents" else "http"
        return HttpAgent(f"{scheme}:{arg}", concurrency=options.concurrency)
    if "/" in spec:
        return _model(spec, options)
    raise TargetError(_unknown(spec))


def path_kind(spec: str) -> str:
    """Which calibrated path a target string runs through (``perfbench calibrate --path``):
    ``http`` for the HTTP client and agent loop, ``in-process`` for the rest."""
    if spec.startswith(("mock+http", "http+agent", "http+agents")) or "/" in spec.split(":")[0]:
        return "http"
    return "in-process"


def _mock(spec: str, options: TargetOptions) -> Target:
    """``mock[:profile][@model]`` in process, ``mock+http[:profile][@model]`` over HTTP; the
    model picks one of the profile's simulated models (its tokenizer and borrowed prices)."""
    from perfbench.mock.profile import load_profile

    base, _, model = spec.partition("@")
    kind, _, arg = base.partition(":")
    profile = load_profile(arg or "default")  # a bad profile fails here, before any process
    if (
        model
        and model not in profile.models
        and profile.model(model)[0] == next(iter(profile.models))
    ):
        known = ", ".join(profile.models)
        if not any(fnmatch.fnmatchcase(model, p) for p in profile.model_map):
            raise TargetError(
                f"mock profile '{arg or 'default'}' has no model '{model}'; it has: {known}"
            )
    if kind == "mock":
        from perfbench.targets.mock import MockAgent

        return MockAgent(profile, profile_name=arg or "default", model=model or None)
    if kind == "mock+http":
        from perfbench.targets.mock_http import MockHttp

        return MockHttp(
            arg or "default",
            seed=options.seed,
            concurrency=options.concurrency,
            stream=options.stream,
            retry=RetryPolicy(max_retries=options.retries),
            check_tokens=options.check_tokens,
            model=model or None,
            url=options.server_url,
        )
    raise TargetError(_unknown(spec))


def _model(spec: str, options: TargetOptions) -> Target:
    from perfbench.targets.agent_loop import ModelAgent

    provider_name, _, model = spec.partition("/")
    provider = PROVIDERS.get(provider_name)
    if provider is None or not model:
        raise TargetError(_unknown(spec))
    key = _key(provider_name, provider, options)
    api = _api(provider.api, model)
    base = options.base_url or provider.base_url
    if provider.api == "anthropic" and not base.rstrip("/").endswith("/v1"):
        # As the Anthropic SDK's base_url: the host, to which the API adds /v1/messages
        # (OpenAI's SDK and servers put /v1 in the base URL; a /v1 here still works too).
        base = base.rstrip("/") + "/v1"
    return ModelAgent(
        api,
        base,
        name=spec,
        key=key,
        stream=options.stream,
        retry=RetryPolicy(max_retries=options.retries),
        concurrency=options.concurrency,
        check_tokens=options.check_tokens,
    )


def _api(kind: str, model: str) -> ChatApi:
    from perfbench.targets.anthropic_messages import AnthropicMessages
    from perfbench.targets.openai_chat import OpenAIChat

    return AnthropicMessages(model) if kind == "anthropic" else OpenAIChat(model)


def _key(name: str, provider: Provider, options: TargetOptions) -> str | None:
    env = options.api_key_env or provider.key_env
    key = os.environ.get(env)
    if key:
        return key
    if options.base_url and not options.api_key_env:
        return None  # a self-hosted server (vLLM, Ollama) usually needs no key
    raise TargetError(
        f"{env} is not set: the {name} target needs an API key. Export it "
        f"(export {env}=...), or name another variable with --api-key-env NAME."
    )


def _unknown(spec: str) -> str:
    known = ", ".join(f"{p}/<model>" for p in PROVIDERS)
    return (
        f"unknown target '{spec}'. Known: mock[:profile], mock+http[:profile], {known}, "
        "http+agent://host/path, python:module:function"
    )
