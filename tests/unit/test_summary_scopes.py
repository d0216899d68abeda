"""A run's scopes (overall, each case, language and tag) made by merging one group per cell,
checked against the plain way: every sample added to each of its scopes' groups in turn.
Whatever the mix of cases, languages, tags, statuses and steps, the two summaries agree (an
error's quoted example may be another sample's of the same kind), also for a run split over
two processes (take_run / absorb) and pooled over runs."""

from __future__ import annotations

import math
import pickle
import random
from collections.abc import Mapping
from typing import Any

import pytest

from perfbench.sample import Sample, Status, Step
from perfbench.stats.goodput import parse as parse_slo
from perfbench.stats.summary import RunScopes, Summarizer, _Group

CASES = {  # id: (language, tags)
    "a": ("en", ("fast",)),
    "b": ("en", ("fast", "tools")),
    "c": ("zh", ()),
    "d": ("zh", ("tools",)),
}
STATUSES: list[Status] = ["ok"] * 6 + ["error", "timeout", "rate_limited", "cancelled"]
KINDS = {"error": ["http_500", "malformed_stream"], "timeout": ["timeout"],
         "rate_limited": ["rate_limited"], "cancelled": ["cancelled"]}  # fmt: skip


def samples(seed: int, n: int, run: int = 0) -> list[Sample]:
    rng = random.Random(seed)
    made = []
    for i in range(n):
        case = rng.choice(sorted(CASES))
        language, tags = CASES[case]
        status = rng.choice(STATUSES)
        start = rng.uniform(0, 10)
        latency = rng.lognormvariate(-2, 1)
        steps = [
            Step("model", "m", start, duration=latency / 2, ttft=rng.uniform(0, 0.1),
                 tokens_in=rng.randint(1, 50), tokens_out=rng.randint(0, 200),
                 wait=rng.uniform(0, 0.01), status="ok" if status == "ok" else status)
            for _ in range(rng.randint(1, 3))
        ]  # fmt: skip
        kind = rng.choice(KINDS[status]) if status != "ok" else None
        made.append(
            Sample(
                "measured", run, case, i, language, start=start, end=start + latency,
                status=status, tags=list(tags), ttft=steps[0].ttft,
                ttfo=rng.choice([None, 0.05]), itl_mean=rng.choice([None, 0.01]),
                itl_gaps=rng.choice([None, [[900, 3], [1500, 2]]]), steps=steps,
                model_calls=len(steps), tokens_in=sum(st.tokens_in or 0 for st in steps),
                tokens_out=sum(st.tokens_out or 0 for st in steps),
                cost=rng.choice([None, 0.001]), input_chars=rng.randint(1, 99),
                scheduled=rng.choice([None, start - 0.001]), error_kind=kind,
                error=f"{kind} #{i}" if kind else None, retries=rng.randint(0, 2),
                model_served=rng.choice([None, None, "other"]),
            )
        )  # fmt: skip
    return made


def plain(items: list[Sample], slo: Any = None) -> dict[str, Any]:
    """The scopes as every sample added to each of its groups (no merging at all)."""
    overall = _Group(slo=slo)
    scopes: dict[str, dict[str, _Group]] = {"cases": {}, "languages": {}, "tags": {}}
    for s in items:
        overall.add(s, 60.0)
        keys = {"cases": [s.case], "languages": [s.language], "tags": s.tags}
        for scope, names in keys.items():
            for name in names:
                scopes[scope].setdefault(name, _Group(slo=slo)).add(s, 60.0)
    window = max(0.0, overall.last_end - overall.first_start)
    return {
        "window": window,
        "overall": overall.finish(window),
        **{k: {n: g.finish(window) for n, g in sorted(v.items())} for k, v in scopes.items()},
    }


def same(got: Any, want: Any, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, Mapping) and sorted(got) == sorted(want), where
        for key in want:
            if key == "example":  # any sample's of that kind: checked by same_failures
                continue
            same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{where}[{k}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert isinstance(got, float) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (
            f"{where}: {got} != {want}"
        )
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def same_failures(metrics: dict[str, Any], items: list[Sample]) -> None:
    for kind, entry in metrics.get("failures", {}).items():
        assert entry["example"] in {s.error for s in items if s.error_kind == kind}


@pytest.mark.parametrize("seed", range(6))
def test_merged_scopes_equal_every_sample_added_to_each_scope(seed: int) -> None:
    items = samples(seed, 300)
    slo = parse_slo("ttft<50ms,e2e<200ms") if seed % 2 else None
    scopes = RunScopes(slo)
    for s in items:
        scopes.add(s, 60.0)
    got, want = scopes.finish(scopes.window), plain(items, slo)
    assert got["cases"] and got["tags"] and len(got["languages"]) == 2
    same(got, want)
    same_failures(got["overall"], items)


def test_a_run_split_over_two_processes_sums_to_the_same_scopes() -> None:
    items = samples(7, 400)
    parent, worker = Summarizer({c: 60.0 for c in CASES}), Summarizer({c: 60.0 for c in CASES})
    for k, s in enumerate(items):
        (parent if k % 3 else worker).add(s)
    handed = worker.take_run(0)
    assert handed is not None
    parent.absorb(0, pickle.loads(pickle.dumps(handed)))  # as over the socket
    got = parent.finish()["runs"][0]
    want = plain(items)
    same({k: v for k, v in got.items() if k != "run"}, want)


def test_pooled_scopes_are_every_run_together() -> None:
    first, second = samples(8, 200, run=0), samples(9, 200, run=1)
    summarizer = Summarizer({c: 60.0 for c in CASES})
    for s in first + second:
        summarizer.add(s)
    pooled = summarizer.finish()["pooled"]
    want = plain(first + second)
    windows = plain(first)["window"] + plain(second)["window"]
    # The pooled throughputs are over the sum of the run windows: compare the counts and
    # distributions, which do not depend on it.
    for scope in ("cases", "languages", "tags"):
        assert sorted(pooled[scope]) == sorted(want[scope])
        for name, metrics in want[scope].items():
            assert pooled[scope][name]["tasks"] == metrics["tasks"]
            same(pooled[scope][name]["latency"], metrics["latency"], f"{scope}.{name}")
    same(pooled["overall"]["latency_all"], want["overall"]["latency_all"])
    assert pooled["window"] == pytest.approx(windows)


def test_every_case_spread_shares_its_metric_names() -> None:
    """A many-case run's per-case spreads (issue 38) hold one copy of each dotted name."""
    summarizer = Summarizer({case: 60.0 for case in CASES})
    for s in samples(7, 200):
        summarizer.add(s)
    spreads = summarizer.finish()["across_runs"]["cases"]
    a, b = (list(spreads[case]) for case in ("a", "c"))
    shared = set(a) & set(b)
    assert "latency.p50" in shared
    by_name = {name: name for name in b}
    assert all(name is by_name[name] for name in a if name in shared)
