"""Mock profiles: YAML descriptions of a simulated model's timing and token behaviour.

Shipped profiles live in the repository's ``mocks/`` folder (packaged as ``perfbench/mocks``).
A distribution is a number (fixed), ``{uniform: [low, high]}`` or
``{lognormal: {median: m, p99: q}}``; draws are seeded by the caller."""

from __future__ import annotations

import fnmatch
import math
import random
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfbench import yamlfile
from perfbench.errors import ProfileError

_Z99 = 2.3263478740408408  # standard normal quantile at 0.99
# The largest value a distribution may give: an hour in milliseconds (as a case's tool
# latency), or as many characters. The mock sleeps and writes what is drawn.
MAX_VALUE = 3_600_000.0
# The widest lognormal: p99 at most this many times the median. Wider ones overflow the
# draws (math range error in every run); the shipped profiles are under 20.
MAX_SPREAD = 1000.0


class _Strict(BaseModel):
    # No infinity or NaN: no time or size is infinite, and NaN passes every `ge` check.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_Value = Annotated[float, Field(ge=0, le=MAX_VALUE)]


class _LogNormal(_Strict):
    median: float = Field(gt=0, le=MAX_VALUE)
    p99: float = Field(gt=0, le=MAX_VALUE)

    @model_validator(mode="after")
    def _ordered(self) -> _LogNormal:
        if self.p99 < self.median:
            raise ValueError("p99 must be at least the median")
        if self.p99 > MAX_SPREAD * self.median:
            raise ValueError(f"p99 may be at most {MAX_SPREAD:g} times the median")
        return self


class Distribution(_Strict):
    """Exactly one of ``fixed``, ``uniform`` or ``lognormal``. Plain numbers mean ``fixed``."""

    fixed: _Value | None = None
    uniform: tuple[_Value, _Value] | None = None
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


class SimModel(_Strict):
    """A simulated model: its tokenizer (tokens per character, by language) and the real model
    whose prices it borrows, so simulated runs can show costs (labelled as simulated)."""

    description: str = ""
    prices_as: str | None = None  # "provider/model", e.g. "openai/gpt-4o"
    tokens_per_char: dict[str, float] = Field(default_factory=lambda: {"default": 0.3})

    def tokens(self, chars: int, language: str) -> int:
        """Simulated token count of ``chars`` characters of ``language`` text."""
        if not chars:
            return 0
        return max(1, math.ceil(chars * self.rate(language)))

    def rate(self, language: str) -> float:
        """Tokens per character of ``language`` text."""
        return self.tokens_per_char.get(language) or self.tokens_per_char.get("default", 0.3)


class RateLimits(_Strict):
    """Limits answered with 429 and Retry-After. A bucket holds ``burst_s`` seconds' worth."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    concurrent: int | None = Field(default=None, ge=1)
    burst_s: float = Field(default=1.0, gt=0)
    # The wait every refusal asks, whatever the limit's own (as LLM routers answer 60 by
    # default); None: the time until the request could pass.
    retry_after_s: float | None = Field(default=None, ge=0, le=3600)


FAULT_KINDS = ("error_500", "error_503", "stall", "reset", "truncate", "malformed")


class Faults(_Strict):
    """Share of requests that get each fault, drawn per request from the seed."""

    error_500: float = Field(default=0.0, ge=0, le=1)
    error_503: float = Field(default=0.0, ge=0, le=1)  # Anthropic's flavour: 529 overloaded
    stall: float = Field(default=0.0, ge=0, le=1)  # nothing is sent for stall_s seconds
    reset: float = Field(default=0.0, ge=0, le=1)  # connection reset halfway through the body
    truncate: float = Field(default=0.0, ge=0, le=1)  # body ends early, connection closed cleanly
    malformed: float = Field(default=0.0, ge=0, le=1)  # one chunk (or the body) is broken JSON
    stall_s: float = Field(default=30.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _at_most_one(self) -> Faults:
        if sum(getattr(self, k) for k in FAULT_KINDS) > 1:
            raise ValueError("fault rates add up to more than 1")
        return self

    def pick(self, u: float) -> str | None:
        """The fault for a uniform draw ``u`` in [0, 1), or None."""
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None


class ReplaySpec(_Strict):
    """``replay: {path: calls.jsonl, timing: recorded}``: the path is relative to the profile
    file; ``fitted`` draws each chunk's time from distributions fitted to the recording."""

    path: str
    timing: Literal["recorded", "fitted"] = "recorded"


class Profile(_Strict):
    """How the simulated model behaves. Times are in milliseconds, sizes in characters."""

    name: str = ""
    description: str = ""
    ttft_ms: Distribution = Distribution(fixed=0)
    itl_ms: Distribution = Distribution(fixed=0)
    output_chars: Distribution = Distribution(fixed=80)
    tool_latency_scale: float = Field(default=1.0, ge=0)
    models: dict[str, SimModel] = Field(default_factory=lambda: {"sim": SimModel()}, min_length=1)
    # Request model name (shell-style pattern) → simulated model; unmatched names get the first.
    model_map: dict[str, str] = Field(default_factory=dict)
    # Case id → the tools the model calls, one turn per entry; an entry that is a list is
    # one turn calling several tools at once. Default: the request's tools in order.
    plans: dict[str, list[str | list[str]]] = Field(default_factory=dict)
    # Without a plan, the most tool calls in one turn (when the request allows parallel calls).
    parallel_tool_calls: int = Field(default=1, ge=1, le=128)
    rate_limits: RateLimits = RateLimits()
    faults: Faults = Faults()
    # Serve a recording's answers (`perfbench run --record FILE`) instead of simulating them.
    replay: ReplaySpec | None = None

    @model_validator(mode="after")
    def _known_models(self) -> Profile:
        unknown = sorted(set(self.model_map.values()) - set(self.models))
        if unknown:
            raise ValueError(f"model_map names undefined models: {', '.join(unknown)}")
        return self

    @property
    def stochastic(self) -> bool:
        """False when every distribution is a fixed value (nothing to draw)."""
        dists = (self.ttft_ms, self.itl_ms, self.output_chars)
        return any(d.fixed is None for d in dists)

    def model(self, requested: str | None = None) -> tuple[str, SimModel]:
        """The simulated model (name, model) that answers for a requested model name."""
        if requested:
            if requested in self.models:
                return requested, self.models[requested]
            for pattern, name in self.model_map.items():
                if fnmatch.fnmatchcase(requested, pattern):
                    return name, self.models[name]
        name = next(iter(self.models))
        return name, self.models[name]


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
        return _located(Profile.model_validate(doc.data or {}), path)
    except yamlfile.YamlProblem as exc:
        raise ProfileError(str(exc.problem)) from exc
    except ValidationError as exc:
        lines = "\n".join(str(p) for p in yamlfile.problems(exc, doc, model=Profile))
        raise ProfileError(lines) from exc


def _located(profile: Profile, path: Path) -> Profile:
    """A replay's recording found next to its profile file, and there at all."""
    if profile.replay is None:
        return profile
    from perfbench.apis.recording import RecordingError, read

    recording = path.parent / profile.replay.path  # an absolute path stays as it is
    if not recording.is_file():
        raise ProfileError(f"{path}: replay: no recording at {recording}")
    try:  # read now: a damaged recording is this profile's error, before any server starts
        read(recording)
    except RecordingError as exc:
        raise ProfileError(f"{path}: replay: {exc}") from None
    replay = profile.replay.model_copy(update={"path": str(recording)})
    return profile.model_copy(update={"replay": replay})
