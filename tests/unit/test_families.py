"""apis/families.py: one row per model API, read by the registry (a model target's ``--api``)
and by the proxy (a forwarded call's path), so both speak an API with the same class."""

from __future__ import annotations

import pytest

from perfbench.apis.families import BY_PATH, FAMILIES, Family
from perfbench.apis.openai_chat import OpenAIChat
from perfbench.errors import TargetError
from perfbench.proxy.forward import API_PATHS, api_for, api_path
from perfbench.targets.agent_loop import ModelAgent
from perfbench.targets.registry import resolve
from perfbench.targets.target_spec import PROVIDERS, TargetSpec


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_the_registry_and_the_proxy_speak_a_family_with_its_row(
    family: Family, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert api_path(f"v1/{family.path}") == family.path  # forwarded
    proxied = api_for(family.path, "m")
    assert type(proxied) is family.wire and proxied.model == "m"  # and timed
    provider = next(name for name, p in PROVIDERS.items() if p.api == family.vendor)
    monkeypatch.setenv(PROVIDERS[provider].key_env, "sk-test")
    target = resolve(TargetSpec(f"{provider}/m", api=family.name))
    assert isinstance(target, ModelAgent) and type(target.api) is family.wire


def test_the_proxy_forwards_the_families_paths_and_two_more_untimed() -> None:
    assert set(BY_PATH) == {f.path for f in FAMILIES.values()}
    assert API_PATHS - set(BY_PATH) == {"messages/count_tokens", "embeddings"}
    assert api_for("embeddings", "m") is None and api_for("messages/count_tokens", "m") is None


def test_engine_fields_go_only_where_the_server_takes_them() -> None:
    chat, messages = FAMILIES["chat"], FAMILIES["messages"]
    engine, hosted = chat.client("m", extras=True), chat.client("m")
    assert isinstance(engine, OpenAIChat) and isinstance(hosted, OpenAIChat)
    assert engine.extras and not hosted.extras
    assert not hasattr(messages.client("m", extras=True), "extras")  # Anthropic has none


def test_a_new_row_is_an_api_the_registry_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new API family is one module and one row: the registry needs nothing else."""

    class Echo(OpenAIChat):
        name = "echo"

    with pytest.raises(TargetError, match="--api 'echo'"):
        TargetSpec("openai/m", api="echo")
    monkeypatch.setitem(FAMILIES, "echo", Family("echo", "echo", "openai", Echo))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    target = resolve(TargetSpec("openai/m", api="echo"))
    assert isinstance(target, ModelAgent) and type(target.api) is Echo


def test_the_mock_serves_every_family() -> None:
    """The mock server keeps its own route table (its handlers are the server side of each
    API); every family a target or the proxy can speak has a route there."""
    from perfbench.mock.service import APIS

    assert {f"/v1/{family.path}" for family in FAMILIES.values()} <= set(APIS)
