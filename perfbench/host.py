"""What machine and software measured a run: stored in meta.json so that comparisons can warn
when two runs were not measured alike. Holds no user names, keys or environment variables."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from perfbench.version import DISTRIBUTION

# Recorded name -> distribution: meta.json keeps "perfbench" (what the runs were measured with),
# looked up under the distribution's own name (PyPI's "perfbench" is another project).
_PACKAGES = {
    "perfbench": DISTRIBUTION,
    **{name: name for name in ("anyio", "httpx", "hdrhistogram", "pydantic", "trio", "uvloop")},
}


def fingerprint() -> dict[str, Any]:
    return {
        "os": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


def package_versions() -> dict[str, str]:
    out = {}
    for name, distribution in _PACKAGES.items():
        try:
            out[name] = version(distribution)
        except PackageNotFoundError:
            continue
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loop_options() -> dict[str, Any]:
    """anyio's asyncio options for a measuring process: uvloop where installed. Its loop costs
    the client about half the CPU per request of asyncio's own (DESIGN §7)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def boot_id() -> str:
    """This boot of this machine's kernel (Linux; "" elsewhere): processes that report the
    same one share CLOCK_MONOTONIC, so their times compare without an offset."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def clock_offset(pings: list[tuple[float, float, float]]) -> float:
    """Another host's monotonic clock minus ours, from round trips (sent, its clock, back):
    the one that came back soonest bounds the error best (half its round trip, NTP's
    estimate)."""
    sent, theirs, back = min(pings, key=lambda p: p[2] - p[0])
    return theirs - (sent + back) / 2
