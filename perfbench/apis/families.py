"""The model APIs perfbench speaks, one row each: the name ``--api`` takes, the path a call
goes to under the base URL (``…/v1``), the providers that serve it (OpenAI-compatible or
Anthropic), and the class that writes its requests and reads its replies. The registry picks a
model target's API here, and the proxy a forwarded call's by its path: a new API family is one
module and one row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from perfbench.apis.anthropic_messages import AnthropicMessages
from perfbench.apis.chat import ChatApi
from perfbench.apis.openai_chat import OpenAIChat
from perfbench.apis.openai_completions import OpenAICompletions
from perfbench.apis.openai_responses import OpenAIResponses

Vendor = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Family:
    name: str  # as --api takes it
    path: str  # after the base URL, which ends in /v1
    vendor: Vendor  # the providers that serve it (target_spec.Provider.api)
    wire: Callable[..., ChatApi]
    # The API has serving engines' request fields (min_tokens, ignore_eos: chat.exact_output).
    engine_fields: bool = True

    def client(self, model: str, extras: bool = False) -> ChatApi:
        """The wire format for ``model``; ``extras``: the server takes serving engines'
        request fields (a ``--base-url`` that is not a hosted provider's, or the mock)."""
        return self.wire(model, extras=extras) if self.engine_fields else self.wire(model)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family("chat", "chat/completions", "openai", OpenAIChat),
        Family("responses", "responses", "openai", OpenAIResponses),
        Family("completions", "completions", "openai", OpenAICompletions),  # legacy: no tools
        Family("messages", "messages", "anthropic", AnthropicMessages, engine_fields=False),
    )
}
BY_PATH: dict[str, Family] = {family.path: family for family in FAMILIES.values()}
