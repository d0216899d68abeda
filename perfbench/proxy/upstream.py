"""Where the proxy sends each API family's calls, and with which credentials.

The agent asks for an OpenAI-style API (Chat Completions, Responses, legacy completions) or
Anthropic's Messages at its route; the upstream maps the family to a base URL and the headers
that authenticate there. The agent's own Authorization or x-api-key (its task token) never
goes upstream: the upstream's key is put in its place, and only the proxy holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from perfbench.task import Task

Family = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends before the API's own path: https://api.openai.com/v1
    headers: dict[str, str] = field(default_factory=dict)  # authentication, extra headers

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")


@dataclass(frozen=True)
class Upstream:
    """The endpoint of each family the upstream serves; ``name`` says what it is (for the
    error an agent gets when it calls a family the upstream does not serve)."""

    name: str
    endpoints: dict[Family, Endpoint]
    # perfbench's mock: each call is named (case, task, call number) in x-perfbench-* headers,
    # as perfbench's own clients name theirs, so its draws are seeded per call and a
    # recording's replay finds the call it recorded.
    keyed: bool = False

    def endpoint(self, family: Family) -> Endpoint | None:
        return self.endpoints.get(family)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credentials it sends: masked wherever a reply might echo them."""
        return tuple(
            value.removeprefix("Bearer ")
            for e in self.endpoints.values()
            for name, value in e.headers.items()
            if name.lower() in ("authorization", "x-api-key", "api-key")
        )


def call_headers(task: Task, step: int) -> dict[str, str]:
    """The names of a task's ``step``-th model call, for a keyed upstream."""
    key = f"{task.seed}|{task.case.id}|{task.phase}|{task.run}|{task.iteration}|{step}"
    return {
        "x-perfbench-key": key,
        "x-perfbench-case": task.case.id,
        "x-perfbench-phase": task.phase,
        "x-perfbench-run": str(task.run),
        "x-perfbench-iteration": str(task.iteration),
        "x-perfbench-step": str(step),
    }


def family_of(path: str) -> Family:
    """The API family a request path (after the route's ``/v1``) belongs to."""
    return "anthropic" if path.lstrip("/").startswith("messages") else "openai"


def mock(url: str) -> Upstream:
    """perfbench's mock server, which speaks every API at ``url``/v1, with no key."""
    endpoint = Endpoint(url.rstrip("/") + "/v1")
    return Upstream("the embedded mock", {"openai": endpoint, "anthropic": endpoint}, keyed=True)


def provider(
    name: str, family: Family, base_url: str, key: str | None, extra: dict[str, str]
) -> Upstream:
    """A provider or server of one family: a key as that family sends it."""
    headers = dict(extra)
    if key:
        if family == "anthropic":
            headers["x-api-key"] = key
        else:
            headers["Authorization"] = f"Bearer {key}"
    return Upstream(name, {family: Endpoint(base_url, headers)})
