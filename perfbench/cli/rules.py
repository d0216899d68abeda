"""The gate's rules from compare's flags and the settings file (``[compare]`` in perfbench.toml
or pyproject): the flags win. ``compare``, ``ab`` and ``plan`` hand them to ``perfbench.api``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfbench import api
from perfbench.cli import config
from perfbench.stats.compare import Rules
from perfbench.stats.gate import build_rules

# compare's flags that shape its rules (``regressed`` takes them as compare does).
RULE_FLAGS = ("max_regression", "floor", "gate_metrics", "scope", "alpha", "noise_bar", "detect",
              "config_file")  # fmt: skip


def settings(config_file: Path | None) -> Mapping[str, Any]:
    """The ``[compare]`` settings: of ``--config``, else ./perfbench.toml or pyproject."""
    return config.compare_settings(config_file or config.find(Path.cwd()))


def configured(config_file: Path | None = None, **flags: Any) -> Rules:
    """The rules of the settings file alone, or with ``build_rules``' own keyword flags."""
    return build_rules(settings(config_file), **flags)


def regressed(
    baseline_ref: str,
    candidate_ref: str,
    root: Path,
    max_regression: list[str] | None = None,
    floor: list[str] | None = None,
    gate_metrics: str | None = None,
    scope: str | None = None,
    alpha: float | None = None,
    noise_bar: float | None = None,
    detect: str | None = None,
    config_file: Path | None = None,
    paired: bool = False,
) -> bool:
    """Whether ``compare`` with these flags finds a regression, printing nothing: ``ab``'s cue
    to measure confirmation rounds before it fails a build."""
    rules = gate_rules(
        settings(config_file), max_regression, floor, gate_metrics, scope, alpha, noise_bar,
        detect, paired,
    )  # fmt: skip
    found = api.compare(baseline_ref, candidate_ref, rules=rules, root=root, force=True)
    return found.comparison is not None and bool(found.comparison.regressions)


def gate_rules(
    settings: Mapping[str, Any],
    max_regression: list[str] | None,
    floor: list[str] | None,
    gate_metrics: str | None,
    scope: str | None,
    alpha: float | None,
    noise_bar: float | None,
    detect: str | None,
    paired: bool = False,
) -> Rules:
    """The rules ``compare``'s flags and settings make (the flags win)."""
    rules = build_rules(
        settings, max_regression or (), floor or (), [gate_metrics] if gate_metrics else None,
        [scope] if scope else None, alpha, noise_bar, detect,
    )  # fmt: skip
    return replace(rules, paired=paired)
