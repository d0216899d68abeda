"""Target strings → targets: the one place a target is built, from a ``TargetSpec`` and a
``Sizing`` (target_spec.py). A hosted provider is one ``PROVIDERS`` entry there; a model API,
one row of ``apis.families.FAMILIES``.

mock | mock:<profile>[@model]        in-process mock agent (tests, overhead)
mock+http | mock+http:<profile>[@model]  mock server in a child process, over real HTTP
<provider>/<model>                   a hosted model in the built-in agent loop
openai/<model> --base-url URL        any OpenAI-compatible server (vLLM, Ollama, LiteLLM)
<model target> --api responses       the model API the loop speaks (``apis.FAMILIES``): chat,
                                     responses or completions (OpenAI-compatible), messages
                                     (Anthropic); none: chat, or messages for anthropic/
http+agent://host/path               a user's agent behind an HTTP endpoint (http+agents:// for TLS)
python:package.module:function       a user's async callable
cmd:<command line>                   any program as the agent, run once per task, its model
                                     calls through perfbench's proxy to --upstream
http+agent://… or python:… --proxy   the agent's model calls through the proxy too
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from perfbench.apis.chat import ChatApi
from perfbench.apis.families import FAMILIES
from perfbench.apis.retry import RetryPolicy
from perfbench.errors import TargetError
from perfbench.targets import Target
from perfbench.targets.target_spec import (
    DEFAULT_API,
    PROVIDERS,
    Provider,
    Sizing,
    TargetSpec,
)

if TYPE_CHECKING:
    from perfbench.proxy.upstream import Upstream
    from perfbench.targets.proxied import Agent


def resolve(spec: TargetSpec | str, sizing: Sizing | None = None) -> Target:
    spec = TargetSpec(spec) if isinstance(spec, str) else spec
    sizing = sizing or Sizing()
    name = spec.target
    kind, _, arg = name.partition(":")
    if spec.proxy and kind not in _AGENTS:
        raise TargetError(
            "--proxy goes with http+agent and python: targets (agents that call their models "
            "themselves): a cmd: target always has its proxy, and perfbench's own client "
            "times a model or mock target's calls"
        )
    if spec.record is not None and not (kind == "cmd" or spec.proxy):
        raise TargetError(
            "--record goes with cmd: targets, or http+agent and python: ones with --proxy (it "
            "keeps what their proxy forwards)"
        )
    if name.startswith("mock"):
        return _mock(spec, sizing)
    if spec.api is not None and kind in ("python", "http+agent", "http+agents"):
        raise TargetError(
            f"--api {spec.api} goes with model targets (provider/model) and mock+http: "
            f"{kind} targets are agents, which call their models themselves"
        )
    if kind == "cmd":
        from perfbench.targets.command import CommandTarget

        if spec.api is not None:
            raise TargetError(
                f"--api {spec.api} goes with model targets: a cmd: agent calls the APIs it "
                "calls (the proxy forwards each to --upstream)"
            )
        return CommandTarget(arg, spec, sizing, _upstream(spec), upstream_variables(spec))
    if kind == "python":
        from perfbench.targets.python_callable import PythonCallable

        if not spec.proxy and (spec.api_key_env or spec.headers or spec.base_url):
            raise TargetError(
                "python: targets make no HTTP requests of perfbench's: --api-key-env, --header "
                "and --base-url go with model, mock+http and http+agent targets (and with "
                "--proxy, to its --upstream)"
            )
        agent = PythonCallable(arg, proxied=spec.proxy)
        return _proxied(agent, spec, sizing) if spec.proxy else agent
    if kind in ("http+agent", "http+agents"):
        return _http_agent(spec, sizing, f"{'https' if kind == 'http+agents' else 'http'}:{arg}")
    if "/" in name:
        return _model(spec, sizing)
    raise TargetError(_unknown(name))


_AGENTS = ("python", "http+agent", "http+agents")


def _http_agent(spec: TargetSpec, sizing: Sizing, url: str) -> Target:
    from perfbench.targets.http_agent import HttpAgent

    if spec.proxy:  # the flags of a model API are the upstream's
        _check_loopback(url)
        return _proxied(HttpAgent(url, concurrency=sizing.concurrency), spec, sizing)
    if spec.base_url:
        raise TargetError("--base-url goes with model targets: an http+agent URL is whole")
    extra = request_headers(spec.headers)
    if spec.api_key_env:  # the agent's own key, sent as a bearer token
        extra.setdefault("Authorization", f"Bearer {_env(spec.api_key_env, '--api-key-env')}")
    return HttpAgent(url, headers=extra, concurrency=sizing.concurrency)


def _check_loopback(url: str) -> None:
    """The proxy listens on 127.0.0.1 only: an agent elsewhere could not reach its route."""
    import ipaddress

    host = urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise TargetError(
            f"--proxy: the proxy listens on 127.0.0.1 only (its routes carry no credentials a "
            f"network should see), so an agent at {host!r} cannot reach it: run the agent on "
            "this machine (http+agent://127.0.0.1:PORT/…)"
        )


def _upstream(spec: TargetSpec) -> Upstream | None:
    """Where a proxy forwards; None for the embedded mock, which the proxy's host starts. A
    model upstream's key is read now, as a model target's is: a missing one fails here."""
    return None if spec.upstream.startswith("mock+http") else proxy_upstream(spec)


def _proxied(agent: Agent, spec: TargetSpec, sizing: Sizing) -> Target:
    from perfbench.targets.proxied import Proxied, ProxyHost

    return Proxied(agent, ProxyHost(spec, sizing, _upstream(spec)))


def proxy_upstream(spec: TargetSpec) -> Upstream:
    """Where a cmd: target's proxy forwards: ``spec.upstream`` as a model target (provider/
    model, with --base-url, --api-key-env and --header as for one). mock+http is started by
    the command target itself (``upstream.mock``)."""
    from perfbench.proxy import upstream

    provider_name, _, model = spec.upstream.partition("/")
    provider = PROVIDERS.get(provider_name)
    if provider is None or not model:
        raise TargetError(
            f"--upstream '{spec.upstream}': give mock+http[:profile] or a model target "
            f"(provider/model; providers: {', '.join(PROVIDERS)})"
        )
    as_model = replace(spec, target=spec.upstream)
    key = _key(provider_name, provider, as_model)
    from perfbench.http.urls import checked_url

    base = checked_url(spec.base_url, "--base-url") if spec.base_url else provider.base_url
    if provider.api == "anthropic" and not base.rstrip("/").endswith("/v1"):
        base = base.rstrip("/") + "/v1"  # as _model: the API adds /messages to …/v1
    extra = request_headers(spec.headers)
    return upstream.provider(spec.upstream, provider.api, base, key, extra)


def upstream_variables(spec: TargetSpec) -> frozenset[str]:
    """The environment variables a proxy's upstream reads its credentials from: the
    ``--api-key-env`` one, the provider's own (DEEPSEEK_API_KEY…) and every ``${VARIABLE}``
    of a ``--header``. A ``cmd:`` agent's environment goes without them."""
    names = set(_VARIABLE.findall(" ".join(spec.headers)))
    if spec.api_key_env:
        names.add(spec.api_key_env)
    provider = PROVIDERS.get(spec.upstream.partition("/")[0])
    if provider is not None:
        names.add(provider.key_env)
    return frozenset(names)


def path_kind(spec: str) -> str:
    """Which calibrated path a target string runs through (``perfbench calibrate --path``):
    ``http`` for the HTTP client and agent loop, ``in-process`` for the rest."""
    if spec.startswith(("mock+http", "http+agent", "http+agents")) or "/" in spec.split(":")[0]:
        return "http"
    return "in-process"


def _mock(spec: TargetSpec, sizing: Sizing) -> Target:
    """``mock[:profile][@model]`` in process, ``mock+http[:profile][@model]`` over HTTP; the
    model picks one of the profile's simulated models (its tokenizer and borrowed prices)."""
    from perfbench.mock.profile import load_profile

    base, _, model = spec.target.partition("@")
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

        if spec.api is not None:
            raise TargetError(
                f"--api {spec.api} goes with model targets and mock+http: the in-process mock "
                "makes no API calls (mock+http serves every API over HTTP)"
            )
        return MockAgent(profile, profile_name=arg or "default", model=model or None)
    if kind == "mock+http":
        from perfbench.targets.mock_http import MockHttp

        return MockHttp(
            arg or "default",
            seed=sizing.seed,
            concurrency=sizing.concurrency,
            stream=spec.stream,
            retry=_retry(spec),
            check_tokens=spec.check_tokens,
            model=model or None,
            url=sizing.server_url,
            # The mock server speaks every API: the one asked for, else Chat Completions.
            api=_api(spec.api or "chat", model or "mock", extras=True),
        )
    raise TargetError(_unknown(spec.target))


def _model(spec: TargetSpec, sizing: Sizing) -> Target:
    from perfbench.targets.agent_loop import ModelAgent

    provider_name, _, model = spec.target.partition("/")
    provider = PROVIDERS.get(provider_name)
    if provider is None or not model:
        raise TargetError(_unknown(spec.target))
    # A --base-url elsewhere than the provider's host is a serving engine or a gateway.
    extras = bool(spec.base_url) and not _same_host(spec.base_url or "", provider)
    api = _api(_choice(spec, provider), model, extras)
    key = _key(provider_name, provider, spec)
    from perfbench.http.urls import checked_url

    base = checked_url(spec.base_url, "--base-url") if spec.base_url else provider.base_url
    if provider.api == "anthropic" and not base.rstrip("/").endswith("/v1"):
        # As the Anthropic SDK's base_url: the host, to which the API adds /v1/messages
        # (OpenAI's SDK and servers put /v1 in the base URL; a /v1 here still works too).
        base = base.rstrip("/") + "/v1"
    return ModelAgent(
        api,
        base,
        name=spec.target,
        key=key,
        stream=spec.stream,
        retry=_retry(spec),
        concurrency=sizing.concurrency,
        check_tokens=spec.check_tokens,
        extra_headers=request_headers(spec.headers),
    )


def _choice(spec: TargetSpec, provider: Provider) -> str:
    """The model API a target speaks: the one asked for, if its provider speaks it."""
    if spec.api is None:
        return DEFAULT_API[provider.api]
    if FAMILIES[spec.api].vendor != provider.api:
        theirs = ", ".join(name for name, f in FAMILIES.items() if f.vendor == provider.api)
        raise TargetError(
            f"--api {spec.api} is not an API of {spec.target}: "
            f"{'Anthropic' if provider.api == 'anthropic' else 'OpenAI-compatible'} "
            f"providers speak {theirs}"
        )
    return spec.api


def _api(name: str, model: str, extras: bool = False) -> ChatApi:
    """The wire format for an API name (checked: a row of FAMILIES); ``extras``: the server
    takes serving engines' request fields (min_tokens, ignore_eos)."""
    return FAMILIES[name].client(model, extras)


def _retry(spec: TargetSpec) -> RetryPolicy:
    return RetryPolicy(max_retries=spec.retries, max_wait_s=spec.max_retry_wait)


def _key(name: str, provider: Provider, spec: TargetSpec) -> str | None:
    """The key to send. A provider's own variable (OPENAI_API_KEY) goes only to that
    provider's host: a --base-url elsewhere (vLLM, Ollama, a gateway) gets a key only when
    --api-key-env names the variable, so a key exported for one service never reaches
    another."""
    if spec.base_url and not spec.api_key_env and not _same_host(spec.base_url, provider):
        return None
    env = spec.api_key_env or provider.key_env
    key = os.environ.get(env)
    if key:
        return key
    raise TargetError(
        f"{env} is not set: the {name} target needs an API key. Export it "
        f"(export {env}=...), or name another variable with --api-key-env NAME."
    )


def _same_host(url: str, provider: Provider) -> bool:
    ours = urlsplit(provider.base_url)
    theirs = urlsplit(url)
    return (theirs.scheme, theirs.hostname) == (ours.scheme, ours.hostname)


# Headers whose values are credentials: they must come from the environment, ${VARIABLE}.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key",
                            "cookie"})  # fmt: skip
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def request_headers(given: tuple[str, ...]) -> dict[str, str]:
    """``--header`` values as a dict, each ``${VARIABLE}`` read from the environment."""
    out: dict[str, str] = {}
    for text in given:
        name, sep, value = text.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _NAME.match(name):
            raise TargetError(f"--header '{_shown(text)}': write it as 'Name: value'")
        if name.lower() in SECRET_HEADERS and not _VARIABLE.search(value):
            raise TargetError(
                f"--header '{name}' carries a credential: give its value as ${{VARIABLE}} "
                f"(e.g. '{name}: Bearer ${{MY_TOKEN}}'), so it stays out of the command line "
                "and the run directory"
            )
        out[name] = _expand(value, f"--header '{name}'")
    return out


def _expand(value: str, where: str) -> str:
    return _VARIABLE.sub(lambda found: _env(found.group(1), where), value)


def _env(name: str, where: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise TargetError(f"{name} is not set ({where} names it): export {name}=...")
    return value


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


_KINDS = ("mock", "mock+http", "cmd", "python", "http+agent", "http+agents")


def _unknown(spec: str) -> str:
    """Every kind of target, and the nearest to what was typed (``opneai/gpt-4o`` →
    ``openai/gpt-4o``): a typo in a provider or a kind."""
    known = ", ".join(f"{p}/<model>" for p in PROVIDERS)
    text = (
        f"unknown target '{spec}'. Known: mock[:profile], mock+http[:profile], {known}, "
        "cmd:<command>, http+agent://host/path (http+agents:// for TLS), "
        "python:module:function"
    )
    nearest = _nearest(spec)
    return text + (f". Did you mean '{nearest}'?" if nearest else "")


def _nearest(spec: str) -> str | None:
    """``spec`` with its provider or kind replaced by the closest known one, if any is close."""
    for sep in ("/", ":"):
        head, found, rest = spec.partition(sep)
        if found and head:
            names = list(PROVIDERS) if sep == "/" else list(_KINDS)
            close = difflib.get_close_matches(head.lower(), names, n=1, cutoff=0.6)
            if close:
                return close[0] + sep + rest
    close = difflib.get_close_matches(spec.lower(), _KINDS, n=1, cutoff=0.6)
    return close[0] if close else None
