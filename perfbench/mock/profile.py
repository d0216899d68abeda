"""Mock profiles: YAML descriptions of a simulated model's timing and token behaviour.

Shipped profiles live in the repository's ``mocks/`` folder (packaged as ``perfbench/mocks``).
A distribution is a number (fixed), ``{uniform: [low, high]}`` or
``{lognormal: {median: m, p99: q}}``; draws are seeded by the caller."""

from __future__ import annotations

import math
import random
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfbench import yamlfile
from perfbench.errors import ProfileError

_Z99 = 2.3263478740408408  # standard normal quantile at 0.99


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _LogNormal(_Strict):
    median: float = Field(gt=0)
    p99: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> _LogNormal:
        if self.p99 < self.median:
            raise ValueError("p99 must be at least the median")
        return self


class Distribution(_Strict):
    """Exactly one of ``fixed``, ``uniform`` or ``lognormal``. Plain numbers mean ``fixed``."""

    fixed: float | None = Field(default=None, ge=0)
    uniform: tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]] | None = None
    lognormal: _LogNormal | None = None

    @model_validator(mode="before")
    @classmethod
    def _number_is_fixed(cls, value: Any) -> Any:
        return {"fixed": value} if isinstance(value, int | float) else value

    @model_validator(mode="after")
    def _exactly_one(self) -> Distribution:
        given = [k for k in ("fixed", "uniform", "lognormal") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of: a number, uniform: [low, high], lognormal: {…}")
        if self.uniform is not None and self.uniform[0] > self.uniform[1]:
            raise ValueError("uniform: low must not exceed high")
        return self

    def draw(self, rng: random.Random) -> float:
        if self.fixed is not None:
            return self.fixed
        if self.uniform is not None:
            return rng.uniform(*self.uniform)
        assert self.lognormal is not None
        sigma = (math.log(self.lognormal.p99) - math.log(self.lognormal.median)) / _Z99
        return self.lognormal.median * math.exp(sigma * rng.gauss(0.0, 1.0))


class Profile(_Strict):
    """How the simulated model behaves. Times are in milliseconds; sizes in characters/tokens."""

    name: str = ""
    description: str = ""
    ttft_ms: Distribution = Distribution(fixed=0)
    itl_ms: Distribution = Distribution(fixed=0)
    output_chars: Distribution = Distribution(fixed=80)
    tool_call_tokens: int = Field(default=20, ge=1)
    tool_latency_scale: float = Field(default=1.0, ge=0)
    tokens_per_char: dict[str, float] = Field(default_factory=lambda: {"default": 0.3})

    @property
    def stochastic(self) -> bool:
        """False when every distribution is a fixed value (nothing to draw)."""
        dists = (self.ttft_ms, self.itl_ms, self.output_chars)
        return any(d.fixed is None for d in dists)

    def tokens(self, chars: int, language: str) -> int:
        """Simulated token count of ``chars`` characters of ``language`` text."""
        rate = self.tokens_per_char.get(language) or self.tokens_per_char.get("default", 0.3)
        return max(1, math.ceil(chars * rate)) if chars else 0


def mocks_dir() -> Path:
    """The shipped profiles: inside the installed package, or the source tree's ``mocks/``."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "mocks"
    return packaged if packaged.is_dir() else here.parent / "mocks"


def shipped() -> dict[str, Path]:
    return {p.stem: p for p in sorted(mocks_dir().glob("*.yaml"))}


@lru_cache(maxsize=32)
def load_profile(ref: str) -> Profile:
    """A profile by shipped name (``default``, ``zero``) or by path to a YAML file."""
    path = Path(ref)
    if not path.is_file():
        found = shipped().get(ref)
        if found is None:
            names = ", ".join(shipped()) or "none found"
            raise ProfileError(f"no mock profile '{ref}': not a file, nor a shipped name ({names})")
        path = found
    try:
        doc = yamlfile.load(path)
        return Profile.model_validate(doc.data or {})
    except yamlfile.YamlProblem as exc:
        raise ProfileError(str(exc.problem)) from exc
    except ValidationError as exc:
        lines = "\n".join(str(p) for p in yamlfile.problems(exc, doc, model=Profile))
        raise ProfileError(lines) from exc
