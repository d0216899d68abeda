"""Scenario rules (``run --scenario mlperf-server``): a run stamped VALID or INVALID by the
rules of MLPerf Inference's Server scenario, each failed rule named. Pure.

The Server scenario (MLPerf Inference rules, "Scenarios"; LoadGen's ``mlperf.conf`` and
``test_settings.h``): queries arrive as a Poisson process; the run lasts at least 600 s
(``*.Server.min_duration = 600000``) and issues at least 100 queries (LoadGen's default
``min_query_count``); the benchmark's latency targets hold at P99
(``*.Server.target_latency_percentile = 99``); and, by the early-stopping rule, the run is
large enough that its P99 holds at 99% confidence. perfbench judges each measured run's length
and query count, and the objectives over the measured runs pooled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfbench.load import Rate
from perfbench.stats.goodput import Slo


@dataclass(frozen=True)
class Scenario:
    name: str
    arrival: str
    min_duration_s: float
    min_queries: int
    percentile: float
    source: str


SCENARIOS = {
    "mlperf-server": Scenario(
        "mlperf-server",
        "poisson",
        600.0,
        100,
        99.0,
        "https://github.com/mlcommons/inference/blob/001712e9daf80386e0dda43f97b8f36981d792c4/"
        "loadgen/mlperf.conf (*.Server.min_duration = 600000, target_latency_percentile = 99);"
        " loadgen/test_settings.h (min_query_count = 100)",
    ),
}


def stamp(
    scenario: Scenario, runs: Sequence[Mapping[str, Any]], pooled: Mapping[str, Any],
    load: object, slo: Slo | None,
) -> dict[str, Any]:  # fmt: skip
    """``{"name", "valid", "rules": [{"rule", "ok", "detail"}], "source"}`` for the measured
    ``runs`` (summary.json's) and their ``pooled`` overall scope."""
    rules = [
        _arrivals(scenario, load),
        _duration(scenario, runs),
        _queries(scenario, runs),
        *_objectives(scenario, pooled, slo),
    ]
    return {
        "name": scenario.name,
        "valid": all(r["ok"] for r in rules),
        "rules": rules,
        "source": scenario.source,
    }


def _rule(rule: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"rule": rule, "ok": ok, "detail": detail}


def _arrivals(scenario: Scenario, load: object) -> dict[str, Any]:
    ok = isinstance(load, Rate) and load.arrival == scenario.arrival and load.trace is None
    shown = f"{load.arrival} at {load.per_second:g}/s" if isinstance(load, Rate) else "closed loop"
    return _rule("arrivals", ok, f"{shown}; the rule asks {scenario.arrival} arrivals (--rate R)")


def _duration(scenario: Scenario, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    shortest = min((float(r.get("window") or 0.0) for r in runs), default=0.0)
    return _rule(
        "min_duration",
        shortest >= scenario.min_duration_s,
        f"the shortest run lasted {shortest:.1f} s; the rule asks {scenario.min_duration_s:g} s",
    )


def _queries(scenario: Scenario, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    fewest = min((int(r["overall"].get("tasks") or 0) for r in runs), default=0)
    return _rule(
        "min_query_count",
        fewest >= scenario.min_queries,
        f"{fewest} queries in the smallest run; the rule asks {scenario.min_queries}",
    )


def _objectives(
    scenario: Scenario, pooled: Mapping[str, Any], slo: Slo | None
) -> list[dict[str, Any]]:
    if slo is None or slo.percentile != scenario.percentile:
        return [_rule("latency", False, f"no P{scenario.percentile:g} preset to judge (--slo)")]
    checks = (pooled.get("goodput") or {}).get("objectives") or []
    out = []
    for c in checks:
        name = f"{c['metric']} P{c['percentile']:g}"
        value = "none" if c["value"] is None else f"{c['value'] * 1000:.1f} ms"
        out.append(_rule(f"latency: {c['metric']}", c["met"],
                         f"{name} {value}, limit {c['limit'] * 1000:g} ms"))  # fmt: skip
        es = c["early_stopping"]
        if es["value"] is None:
            ok, detail = False, f"{c['n']} values; an estimate of {name} needs {es['needs']}"
        else:
            ok = es["value"] <= c["limit"]
            detail = f"{name} at 99% confidence {es['value'] * 1000:.1f} ms, limit " + (
                f"{c['limit'] * 1000:g} ms"
            )
        out.append(_rule(f"early_stopping: {c['metric']}", ok, detail))
    return out
