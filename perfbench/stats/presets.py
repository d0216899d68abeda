"""Named service-level objectives (``--slo mlperf:llama2-70b:interactive``): MLPerf
Inference's LLM latency targets and GuideLLM's use-case SLOs, each with its source, read from
``slo_presets.yaml`` beside this module. ``perfbench slo list`` prints them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from perfbench.errors import GateError
from perfbench.stats.thresholds import quantity

PRESET_FILE = "slo_presets.yaml"


@dataclass(frozen=True)
class Preset:
    name: str
    limits: tuple[tuple[str, float], ...]  # metric → upper limit in seconds, at ``percentile``
    percentile: float
    source: str  # the source's title
    url: str  # where the numbers were read, at a fixed commit
    cite: str  # the lines read there

    @property
    def text(self) -> str:
        """``ttft ≤ 450 ms, tpot ≤ 40 ms at P99``: what the preset holds, for a table."""
        terms = ", ".join(f"{name} ≤ {_ms(limit)}" for name, limit in self.limits)
        return f"{terms} at P{self.percentile:g}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"


@functools.cache
def presets() -> dict[str, Preset]:
    """Every preset by name, in the file's order."""
    raw: dict[str, Any] = yaml.safe_load(
        resources.files("perfbench.stats").joinpath(PRESET_FILE).read_text(encoding="utf-8")
    )
    sources = raw["sources"]
    out = {}
    for name, entry in raw["presets"].items():
        source = sources[entry["source"]]
        limits = tuple(
            (metric, quantity(value, f"{PRESET_FILE} {name} {metric}"))
            for metric, value in entry["objectives"].items()
        )
        out[name] = Preset(
            name, limits, float(source["at"]), source["title"], source["url"], entry["cite"]
        )
    return out


def is_preset_name(text: str) -> bool:
    """``mlperf:…``/``guidellm:…``: a name, not objectives (which have a ``<``)."""
    return ":" in text and "<" not in text


def find(name: str) -> Preset:
    """The preset called ``name`` (case-insensitive); a GateError listing the known ones."""
    known = presets()
    found = known.get(name.strip().lower())
    if found is None:
        raise GateError(
            f"--slo {name.strip()}: no such preset; known: {', '.join(known)} "
            "(perfbench slo list shows their objectives and sources)"
        )
    return found
