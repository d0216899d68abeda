"""What a task cost, from well-kept price data: genai-prices (offline, maintained) and a dated
override file for models it lacks or contract prices. A model with no price is "unpriced"
(``None``), never a silent $0.

Prices are looked up at a fixed timestamp (the run's start): some providers' prices depend on
the time of day, and a report must not change when it is re-rendered later. Each distinct
(model, tokens in, tokens out) is priced once (genai-prices takes ~0.1 ms a call)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfbench import yamlfile
from perfbench.errors import PerfbenchError
from perfbench.sample import Sample

OVERRIDES = "perfbench.prices.yaml"
# perfbench provider names → genai-prices provider ids (None: not covered; use overrides).
_PROVIDERS: dict[str, str | None] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "deepseek": "deepseek",
    "qwen": None,
    "zhipu": "zhipuai",
}


class _Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    provider: str | None = None
    input_mtok: Decimal = Field(ge=0)  # USD per million input tokens
    output_mtok: Decimal = Field(ge=0)


class _Overrides(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    date: date  # when these prices were checked
    prices: list[_Price]


@dataclass(frozen=True)
class Pricer:
    timestamp: datetime
    overrides: tuple[_Price, ...] = ()
    overrides_date: date | None = None
    overrides_file: str | None = None

    def source(self) -> dict[str, Any]:
        """Stored in meta.json: where the prices came from, and as of when."""
        try:
            package = f"genai-prices {version('genai-prices')}"
        except PackageNotFoundError:
            package = "genai-prices (not installed)"
        return {
            "package": package,
            "timestamp": self.timestamp.isoformat(timespec="seconds"),
            "overrides": self.overrides_file,
            "overrides_date": self.overrides_date.isoformat() if self.overrides_date else None,
        }

    def prepare(self, ref: str | None) -> None:
        """Load the price data for ``ref`` now: the first lookup imports genai-prices and
        reads its tables (60–115 ms), which inside the first priced task stalled every task in
        flight."""
        self.cost(ref, 1, 1)

    def cost(
        self,
        ref: str | None,
        tokens_in: int | None,
        tokens_out: int | None,
        cache_read: int | None = None,
        cache_write: int | None = None,
    ) -> float | None:
        """USD for one task's tokens under ``ref`` ("provider/model"); None when unpriced.
        ``tokens_in`` counts every input token; ``cache_read`` and ``cache_write`` are the
        part of them the prompt cache served or stored, priced at their own rates."""
        if ref is None or (tokens_in is None and tokens_out is None):
            return None
        return _cost(self, ref, tokens_in or 0, tokens_out or 0, cache_read or 0, cache_write or 0)


@functools.lru_cache(maxsize=65536)
def _cost(
    pricer: Pricer, ref: str, tokens_in: int, tokens_out: int, read: int, write: int
) -> float | None:
    provider, _, model = ref.rpartition("/")
    for p in pricer.overrides:
        if p.model == model and p.provider in (None, provider or None):
            total = (p.input_mtok * tokens_in + p.output_mtok * tokens_out) / Decimal(1_000_000)
            return float(total)
    from genai_prices import Usage, calc_price  # ~0.3 s import: only when something is priced

    provider_id = _PROVIDERS.get(provider, provider or None)
    if provider and provider in _PROVIDERS and provider_id is None:
        return None
    try:
        usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out)
        if read or write:  # genai-prices counts these within input_tokens, as perfbench does
            usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out,
                          cache_read_tokens=read, cache_write_tokens=write)  # fmt: skip
        found = calc_price(
            usage,
            model,
            provider_id=provider_id,
            genai_request_timestamp=pricer.timestamp,
        )
    except LookupError:
        return None
    return float(found.total_price)


def load_pricer(
    path: Path | None, timestamp: datetime | None = None, *, default: bool = True
) -> Pricer:
    """Prices with the overrides of ``path``, or (``default``) of ./perfbench.prices.yaml
    when it exists."""
    when = timestamp or datetime.now(UTC)
    if path is None:
        fallback = Path(OVERRIDES)
        if not default or not fallback.is_file():
            return Pricer(when)
        path = fallback
    try:
        doc = yamlfile.load(path)
        parsed = _Overrides.model_validate(doc.data or {})
    except yamlfile.YamlProblem as exc:
        raise PerfbenchError(str(exc.problem)) from exc
    except ValidationError as exc:
        problems = yamlfile.problems(exc, doc, model=_Overrides)
        raise PerfbenchError("\n".join(str(p) for p in problems)) from exc
    return Pricer(when, tuple(parsed.prices), parsed.date, str(path))


def price(pricer: Pricer, ref: str | None, simulated: bool, sample: Sample) -> float | None:
    """A task's cost. By the model that answered when the server names another than the one
    asked (an alias resolved, a router's choice), if genai-prices knows it; else by ``ref``.
    A simulated target is priced as its profile says (the mock's name is its own)."""
    tokens = (sample.tokens_in, sample.tokens_out, sample.tokens_cache_read,
              sample.tokens_cache_write)  # fmt: skip
    if sample.model_served and ref and not simulated:
        provider = ref.rpartition("/")[0]
        served = f"{provider}/{sample.model_served}" if provider else sample.model_served
        found = pricer.cost(served, *tokens)
        if found is not None:
            return found
    return pricer.cost(ref, *tokens)
