"""What to measure, as a plain record: ``TargetSpec`` (a target string and how to talk to it,
every field a flag of ``perfbench run`` and ``sweep``), ``Sizing`` (what a run adds: tasks in
flight, seed, a mock server already running), and the hosted providers perfbench knows. Only
the registry (``targets/registry.py``) builds a target from them; the spec layer records and
reads them back."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from perfbench.apis.families import FAMILIES, Vendor
from perfbench.apis.retry import MAX_WAIT_S
from perfbench.errors import TargetError

# Each provider family's own API (``--api`` left out); every API is a row of apis.FAMILIES.
DEFAULT_API = {"openai": "chat", "anthropic": "messages"}


@dataclass(frozen=True)
class Provider:
    api: Vendor
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
class TargetSpec:
    """What to measure: a target string (the forms in registry.py) and how to talk to it.
    Every field is a flag of ``perfbench run`` and ``sweep`` (cli/options.py ``TARGET``),
    recorded in the run's spec; no key is one (``api_key_env`` names the variable)."""

    target: str = "mock+http"
    base_url: str | None = None
    api_key_env: str | None = None
    stream: bool = True
    retries: int = 3
    max_retry_wait: float = MAX_WAIT_S  # the longest wait a retry may ask; longer: refused
    check_tokens: bool = False  # also count output tokens offline when the API reports usage
    # Extra request headers, "Name: value"; ${VARIABLE} in a value is read from the environment
    # when the target is made, so a secret is never on the command line nor in the run.
    headers: tuple[str, ...] = ()
    # Connect to an HTTP target before the first task (Target.preflight): one that is down
    # fails the run at once, with what to check, instead of as a run of failed tasks.
    preflight: bool = True
    # The model API of a model or mock+http target (apis.FAMILIES); None: the provider's own
    # (chat, or messages for anthropic/).
    api: str | None = None
    # A cmd: target's model calls go through perfbench's proxy to this target (a model
    # target or mock+http[:profile]); base_url, api_key_env and headers apply to it.
    upstream: str = "mock+http"
    # A cmd: target's calls, answers and timing kept in this file (JSONL) as they pass the
    # proxy, for a mock profile's replay: (perfbench.apis.recording).
    record: str | None = None
    # An http+agent or python: target's model calls through the proxy too, each task handed
    # its own route (targets/proxied.py); then base_url, api_key_env and headers are the
    # upstream's, as for a cmd: target.
    proxy: bool = False

    def __post_init__(self) -> None:
        if self.api is not None and self.api not in FAMILIES:
            raise TargetError(f"--api {self.api!r}: {_apis()}")

    def to_doc(self) -> dict[str, Any]:
        """The spec as recorded (meta.json, sweep-plan.json): a ``--base-url``'s credentials
        and credential-like query values are masked (they stay in this process only)."""
        from perfbench.http.urls import recorded_url

        doc = asdict(self)
        if self.base_url:
            doc["base_url"] = recorded_url(self.base_url)
        return doc


@dataclass(frozen=True)
class Sizing:
    """What a run adds to a target's spec: how many tasks it holds in flight (its
    connections; 0 = no limit), the seed, and a mock server already running."""

    concurrency: int = 1
    seed: int = 0
    server_url: str | None = None


def _apis() -> str:
    return "the model APIs are " + ", ".join(FAMILIES) + " (none: the provider's own)"
