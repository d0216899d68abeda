"""Release-to-release comparison: baseline and candidate summaries in, one verdict per metric out.

Pure: plain ``summary.json`` documents in, a :class:`Comparison` out (its ``asdict`` is the
``--json`` schema). The unit of replication is the run (DESIGN §6): each side's run-level
values are compared with a one-sided exact Mann-Whitney test, and a metric regresses only when
all three hold:

* the ratio of the medians across runs is beyond the metric's *bar*: its threshold (10% for
  P50, mean, TTFT P50, throughput, tokens out and cost, 15% for P95, 25% for P99, 5% for
  tokens in; 0 for rates) or, when the runs are noisier than that, ``NOISE_K`` times their
  run-to-run coefficient of variation, whichever is larger,
* the test gives p < alpha (0.05) that the candidate is worse, after Benjamini-Hochberg's
  correction over the gated metrics. It controls the false discovery rate; in an A/A
  comparison every metric's null is true, and then that rate is the chance of any false alarm
  (the family-wise error rate), so the same code fails the gate at most 5% of the time however
  many metrics are gated. Holm's correction (``correction = "holm"``) controls that chance
  under any change too, but asks alpha / m of every first finding: with 5 runs a side and one
  run left out as an outlier (4 vs 5: p ≥ 1/126), no change could pass alpha / 7. A real
  slowdown moves several metrics at once, which BH rewards and Holm does not.
* the difference of the medians is above the metric's absolute floor (5 ms for latencies,
  1 percentage point for error and 429 rates).

The noise bar is what keeps A/A quiet: on the demo suite P50 and TTFT P95 vary 10–17% from run
to run, as much as their thresholds. Simulated at that noise (tests/unit/test_gate_noise.py),
fixed thresholds failed 31 of 100 comparisons of the same code under --strict (mostly
"inconclusive"), the bar 3. A change inside the runs' own noise is not evidence.

A change beyond threshold and floor that is not significant is *inconclusive* in the worse
direction (say: more runs are needed) and *pass* in the better one. Pooling every task of every
run into one test would treat run-to-run noise as signal: simulated, it raised 42% false alarms
where the run-level test raised 4%.

Tokens and cost of deterministic cases are the same in every run: when both sides show no
spread at all, they are compared exactly (any difference beyond the tolerance, 0 unless
``--max-regression`` sets one, counts; no test). Output that varies (any real model, the
demo mock) is tested like a latency, against its threshold.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from perfbench.stats import breakdown, early_stopping, paired, power
from perfbench.stats.advice import gaps_merged
from perfbench.stats.ranks import midranks

Better = Literal["lower", "higher"]
Verdict = Literal["regression", "improvement", "pass", "inconclusive", "n/a"]
Scope = Literal["overall", "case", "language"]
Correction = Literal["auto", "holm", "bh", "none"]
Method = Literal["holm", "benjamini-hochberg", "none"]
METHODS: dict[Correction, Method] = {
    "auto": "benjamini-hochberg",  # see the module's docstring
    "holm": "holm",
    "bh": "benjamini-hochberg",
    "none": "none",
}
EXACT_LIMIT = 40  # runs on both sides together; above it the normal approximation is used
# A change must exceed this many run-to-run CVs to count. The difference of two medians of 5
# runs has a spread of about 0.76 CV, so 2.5 CVs is ~3.3 of its standard errors: two sides of
# the same code land that far apart in well under 1% of comparisons per metric, even with the
# CV itself estimated from the runs (8 degrees of freedom).
NOISE_K = 2.5


@dataclass(frozen=True)
class Metric:
    """One comparable figure of a run: where it is in a run's metrics, which way is better,
    the relative threshold and the absolute floor a change must pass to count."""

    name: str
    path: str  # dotted path in a run's per-scope metrics (stats.py)
    better: Better
    threshold: float  # relative, 0.15 = 15%
    floor: float  # absolute, in the metric's unit
    unit: Literal["s", "rate", "per task", "tasks/s", "tokens", "USD"]
    deterministic: bool = False  # equal in every run of a deterministic suite
    tolerance: float = 0.0  # relative; for exact (no-spread) comparisons of deterministic runs

    @property
    def quantile(self) -> float | None:
        """0.95 for a P95 and so on; None for a metric that is not a percentile."""
        match = re.fullmatch(r"(?:latency|ttft|ttfo|tpot|itl_pooled)\.p(\d+)", self.path)
        return int(match.group(1)) / 100 if match else None

    @property
    def count_path(self) -> str:
        """Where a run's number of tasks behind this metric's distribution is."""
        return self.path.rsplit(".", 1)[0] + ".n"


MS5 = 0.005
METRICS: tuple[Metric, ...] = (
    Metric("p50", "latency.p50", "lower", 0.10, MS5, "s"),
    Metric("p95", "latency.p95", "lower", 0.15, MS5, "s"),
    Metric("p99", "latency.p99", "lower", 0.25, MS5, "s"),
    Metric("mean", "latency.mean", "lower", 0.10, MS5, "s"),
    Metric("ttft_p50", "ttft.p50", "lower", 0.10, MS5, "s"),
    Metric("ttft_p95", "ttft.p95", "lower", 0.15, MS5, "s"),
    Metric("throughput", "throughput", "higher", 0.10, 0.0, "tasks/s"),
    # Rates sit near zero, where ratios explode: the floor (in points) does the work.
    Metric("error_rate", "error_rate", "lower", 0.0, 0.01, "rate"),
    Metric("rate_429", "throttle_rate", "lower", 0.0, 0.01, "per task"),  # 429 answers
    # Output length varies from run to run with any sampling model (5% CV on the demo mock):
    # a 0% threshold made every such wobble "inconclusive". Runs of a deterministic suite that
    # show no spread are still compared exactly, at ``tolerance``.
    Metric("tokens_in", "tokens_in", "lower", 0.05, 0.0, "tokens", deterministic=True),
    Metric("tokens_out", "tokens_out", "lower", 0.10, 0.0, "tokens", deterministic=True),
    Metric("cost", "cost_per_task", "lower", 0.10, 0.0, "USD", deterministic=True),
    # Serving figures, shown but not gated unless --gate names them: per request (a task of 3
    # model calls is 3), and the share of tasks meeting every --slo objective.
    Metric("ttft_p99", "ttft.p99", "lower", 0.25, MS5, "s"),
    Metric("ttfo_p50", "ttfo.p50", "lower", 0.10, MS5, "s"),
    Metric("itl_p50", "itl_pooled.p50", "lower", 0.10, 0.0005, "s"),  # every gap pooled
    Metric("itl_p99", "itl_pooled.p99", "lower", 0.25, 0.0005, "s"),
    Metric("tpot_p50", "tpot.p50", "lower", 0.10, 0.0005, "s"),
    Metric("goodput", "goodput.task_share", "higher", 0.0, 0.01, "rate"),
    # Success: finished ok and as the case expects (stats/breakdown.py), gated like the
    # error rate; what a success costs, and where a task's time went, shown beside it.
    Metric("success_rate", "success.rate", "higher", 0.0, 0.01, "rate"),
    Metric("cost_per_success", "success.cost_per_success", "lower", 0.10, 0.0, "USD"),
    Metric("model_p95", "time_split.model.p95", "lower", 0.15, MS5, "s"),
    Metric("agent_p95", "time_split.agent.p95", "lower", 0.15, MS5, "s"),
    Metric("tool_p95", "time_split.tool.p95", "lower", 0.15, MS5, "s"),
)
INFORMATIONAL = frozenset({"ttft_p99", "ttfo_p50", "itl_p50", "itl_p99", "tpot_p50", "goodput",
                           "cost_per_success", "model_p95", "agent_p95", "tool_p95"})  # fmt: skip
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


@dataclass(frozen=True)
class Rules:
    """What counts as a regression. Built from defaults, the config file and the command line."""

    metrics: tuple[Metric, ...] = METRICS
    alpha: float = 0.05
    # The declared, gated metrics: every one but the informational serving figures.
    gate: tuple[str, ...] = tuple(m.name for m in METRICS if m.name not in INFORMATIONAL)
    # Whether the gate was named (--gate, ``gate`` in the settings). The default one leaves out
    # a percentile that rests on too few tasks a run (``thin``): a run's P99 of 32 tasks is its
    # slowest task, whose luck no number of runs averages below P99's threshold; a named gate
    # keeps it, as the user asked.
    gate_named: bool = False
    scopes: tuple[Scope, ...] = ("overall",)  # gated scopes; other rows are informational
    correction: Correction = "auto"  # METHODS
    noise_k: float = NOISE_K  # 0 turns the noise bar off: fixed thresholds only
    # The change each gated metric must be able to flag (--detect); None: its own threshold.
    detect: float | None = None
    # Run i of one side pairs with run i of the other (ab's rounds): the signed-rank test on
    # the per-round ratios (stats/paired.py) replaces the rank test across the sides.
    paired: bool = False

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)

    def with_threshold(self, name: str, threshold: float) -> Rules:
        return self._replace_metric(name, threshold=threshold)

    def with_floor(self, name: str, floor: float) -> Rules:
        return self._replace_metric(name, floor=floor)

    def with_tolerance(self, name: str, threshold: float) -> Rules:
        """A threshold set by the user is also the tolerance of exact comparisons."""
        return self._replace_metric(name, threshold=threshold, tolerance=threshold)

    def _replace_metric(self, name: str, **changes: float) -> Rules:
        if name not in {m.name for m in self.metrics}:
            raise KeyError(name)
        metrics = tuple(replace(m, **changes) if m.name == name else m for m in self.metrics)  # type: ignore[arg-type]
        return replace(self, metrics=metrics)

    @property
    def method(self) -> Method:
        return METHODS[self.correction]


@dataclass(frozen=True)
class Spread:
    median: float
    min: float
    max: float
    n: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class Row:
    scope: Scope
    key: str  # case id or language; "" for overall
    metric: str
    unit: str
    better: Better
    baseline: Spread | None
    candidate: Spread | None
    ratio: float | None  # candidate median / baseline median
    change: float | None  # signed relative change of the median, (c − b) / b
    p: float | None  # one-sided p that the candidate moved the way it did
    verdict: Verdict
    gated: bool
    q: float | None = None  # p adjusted for the number of gated rows (Holm or BH)
    exact: bool = False  # compared exactly: both sides deterministic
    # Runs left out of the test as outliers (index into that side's runs), see _outlier.
    outliers: tuple[tuple[str, int], ...] = ()
    noise: float | None = None  # pooled run-to-run coefficient of variation of the two sides
    bar: float | None = None  # relative change that counts: max(threshold, noise_k × noise)
    # The bar with the outlier runs' spread counted too: an "inconclusive" has no test behind
    # it, so it must stand out from all the noise seen (one 16-task run whose P95 doubled is
    # that metric's noise, not a reason to ask for more runs).
    wide_bar: float | None = None
    by_noise: bool = False  # the noise set the bar, not the threshold
    tasks: int | None = None  # fewest tasks in any run behind this (percentile) metric
    # Smallest relative change these runs catch 4 times in 5 at this noise (power.detectable
    # at the first corrected level, alpha / m), its threshold included.
    detectable: float | None = None
    # Power: whether these runs could have flagged the declared change (--detect, by default
    # the threshold) in this metric alone; if not, the runs a side and the --repeat factor
    # that would (None: out of reach, ``power_note`` says why).
    detect: float | None = None
    underpowered: bool = False
    needs: tuple[int, int] | None = None
    power_note: str = ""
    paired: bool = False  # tested pair by pair (run i with run i): change is the pairs' own


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    correction: str  # "holm", "benjamini-hochberg" or "none"
    gated: list[str]
    scopes: list[str]
    alpha: float
    runs: tuple[int, int]
    warnings: list[str] = field(default_factory=list)
    moved: str | None = None  # which part of a task's time moved (stats/breakdown.py)
    gaps_merged: bool = False  # a side's client lagged: its ITL rows need their caveat
    # Each side's early-stopping estimate of the tail percentiles compared (runs pooled).
    tails: list[early_stopping.RowClaims] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.gated and r.verdict == "regression"]

    @property
    def inconclusive(self) -> list[Row]:
        return [r for r in self.rows if r.gated and r.verdict == "inconclusive"]

    @property
    def underpowered(self) -> list[Row]:
        """Gated rows that could not have failed at the declared change: a pass of theirs
        says nothing."""
        return [r for r in self.rows if r.gated and r.underpowered]

    @property
    def improvements(self) -> list[Row]:
        return [r for r in self.rows if r.gated and r.verdict == "improvement"]

    @property
    def verdict(self) -> Verdict:
        if self.regressions:
            return "regression"
        if self.inconclusive:
            return "inconclusive"
        return "improvement" if self.improvements else "pass"


def compare(baseline: Mapping[str, Any], candidate: Mapping[str, Any], rules: Rules) -> Comparison:
    """Compare two ``summary.json`` documents of the same suite."""
    base_runs, cand_runs = baseline["runs"], candidate["runs"]
    unpaired = rules.paired and len(base_runs) != len(cand_runs)
    rules = replace(rules, paired=rules.paired and not unpaired)
    rows = [
        _row(rules, metric, scope, key, base_runs, cand_runs)
        for scope, key in _scopes(base_runs, cand_runs)
        for metric in rules.metrics
    ]
    rows = [r for r in rows if r.baseline is not None or r.candidate is not None]
    method = rules.method
    if method != "none":
        rows = _corrected(rows, rules, holm if method == "holm" else benjamini_hochberg)
    runs = (len(base_runs), len(cand_runs))
    tested = sum(_tested(r) for r in rows) if method != "none" else 1
    # A change in one metric alone must reach the first (strictest) step, alpha / m, of
    # Holm and BH alike: what the runs can detect is said for that case, the hardest.
    level = rules.alpha / max(1, tested)
    rows = [_with_power(_with_detectable(r, rules, level), rules, level) for r in rows]
    return Comparison(
        rows=rows,
        correction=method,
        gated=_gated(rules, rows),
        scopes=list(rules.scopes),
        alpha=rules.alpha,
        runs=runs,
        warnings=[
            *_warnings(*runs, rules.alpha, rules.paired),
            *([_UNPAIRED.format(*runs)] if unpaired else []),
            *_thin_percentiles(rows, rules),
            *_mixed_cases(base_runs, rules),
        ],
        moved=breakdown.moved([r["overall"] for r in base_runs], [r["overall"] for r in cand_runs]),
        gaps_merged=gaps_merged(baseline) or gaps_merged(candidate),
        tails=early_stopping.row_claims(
            baseline, candidate, {m.name: m.path for m in rules.metrics}
        ),
    )


def _gated(rules: Rules, rows: Sequence[Row]) -> list[str]:
    """The declared gate less the metrics whose overall row it left out (thin percentiles)."""
    left_out = {
        r.metric for r in rows if r.scope == "overall" and "overall" in rules.scopes and not r.gated
    }
    return [name for name in rules.gate if name not in left_out]


def _scopes(base: Sequence[Any], cand: Sequence[Any]) -> Iterable[tuple[Scope, str]]:
    yield "overall", ""
    for scope, name in (("case", "cases"), ("language", "languages")):
        keys = sorted({k for r in (*base, *cand) for k in r.get(name, {})})
        for key in keys:
            yield scope, key  # type: ignore[misc]


def _values(
    runs: Sequence[Mapping[str, Any]], scope: Scope, key: str, path: str
) -> dict[int, float]:
    """Run index → value, for the runs that have the figure."""
    out = {}
    for index, run in enumerate(runs):
        metrics = run["overall"] if scope == "overall" else run[scope + "s"].get(key)
        value = _get(metrics, path) if metrics is not None else None
        if value is not None:
            out[index] = float(value)
    return out


OUTLIER_Z = 3.5  # modified z-score (Iglewicz and Hoaglin) beyond which a run is an outlier
OUTLIER_SHARE = 0.10  # …and only if it is also this far from the median, relatively


def _outlier(values: Mapping[int, float]) -> int | None:
    """The one run (of four or more) far from the others, or None. One slow run, say a cold
    cache or a noisy neighbour, would otherwise cost the rank test its power: with five runs a
    side, a single baseline run above every candidate run lifts p from 0.004 to 0.075."""
    if len(values) < 4:
        return None
    med = statistics.median(values.values())
    mad = statistics.median(abs(v - med) for v in values.values())
    index = max(values, key=lambda i: abs(values[i] - med))
    deviation = abs(values[index] - med)
    if deviation <= OUTLIER_SHARE * abs(med):
        return None
    if mad and deviation / (1.4826 * mad) <= OUTLIER_Z:
        return None
    return index


def _get(metrics: Mapping[str, Any], path: str) -> Any:
    value: Any = metrics
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return None if isinstance(value, bool) else value


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values), len(values), tuple(values))


def _row(
    rules: Rules,
    metric: Metric,
    scope: Scope,
    key: str,
    base_runs: Sequence[Mapping[str, Any]],
    cand_runs: Sequence[Mapping[str, Any]],
) -> Row:
    base_by_run = _values(base_runs, scope, key, metric.path)
    cand_by_run = _values(cand_runs, scope, key, metric.path)
    if rules.paired:  # a run without the figure leaves its pair out
        both = base_by_run.keys() & cand_by_run.keys()
        base_by_run = {i: v for i, v in base_by_run.items() if i in both}
        cand_by_run = {i: v for i, v in cand_by_run.items() if i in both}
    tasks = _fewest_tasks(metric, scope, key, base_runs, cand_runs)
    gated = metric.name in rules.gate and scope in rules.scopes
    gated = gated and (rules.gate_named or not thin(metric, tasks))
    b, c = spread(list(base_by_run.values())), spread(list(cand_by_run.values()))
    if b is None or c is None:
        return Row(scope, key, metric.name, metric.unit, metric.better, b, c, None, None, None,
                   "n/a", gated)  # fmt: skip
    exact = metric.deterministic and b.min == b.max and c.min == c.max
    if rules.paired and not exact:
        return _paired_row(rules, metric, scope, key, (b, c), gated, tasks)
    outliers = () if exact else _outliers(base_by_run, cand_by_run)
    base = [v for i, v in base_by_run.items() if ("baseline", i) not in outliers]
    cand = [v for i, v in cand_by_run.items() if ("candidate", i) not in outliers]
    noise = None if exact else power.pooled_cv(base, cand)
    bar = metric.tolerance if exact else max(metric.threshold, rules.noise_k * (noise or 0.0))
    every = power.pooled_cv(list(base_by_run.values()), list(cand_by_run.values()))
    wide_bar = bar if exact or not outliers else max(bar, rules.noise_k * (every or 0.0))
    row = Row(
        scope,
        key,
        metric.name,
        metric.unit,
        metric.better,
        b,
        c,
        c.median / b.median if b.median else None,
        (c.median - b.median) / abs(b.median) if b.median else None,
        _p(metric, b, c, base, cand, exact),
        "pass",
        gated,
        exact=exact,
        outliers=outliers,
        noise=noise,
        bar=bar,
        wide_bar=wide_bar,
        by_noise=not exact and bar > metric.threshold,
        tasks=tasks,
    )
    p = row.p if row.p is not None else 1.0
    return replace(row, verdict=_verdict(metric, row, p, rules.alpha))


def _paired_row(
    rules: Rules,
    metric: Metric,
    scope: Scope,
    key: str,
    sides: tuple[Spread, Spread],
    gated: bool,
    tasks: int | None,
) -> Row:
    """A row of paired runs: the pairs' median change, their own noise (what a round's two
    runs share cancels out; no run is an outlier, a pair's ranks bound its weight) and the
    signed-rank test's p in the direction they moved."""
    b, c = sides
    diffs = paired.differences(b.values, c.values)
    noise = paired.noise(diffs)
    bar = max(metric.threshold, rules.noise_k * (noise or 0.0))
    change = paired.change(b.values, c.values)
    moved = paired.moved(b.values, c.values)
    higher = moved > 0 or (moved == 0 and metric.better == "lower")
    row = Row(
        scope, key, metric.name, metric.unit, metric.better, b, c,
        None if change is None else 1 + change, change,
        paired.signed_rank(diffs if higher else [-d for d in diffs]), "pass", gated,
        noise=noise, bar=bar, wide_bar=bar, by_noise=bar > metric.threshold,
        tasks=tasks, paired=True,
    )  # fmt: skip
    return replace(row, verdict=_verdict(metric, row, row.p or 1.0, rules.alpha))


def _p(
    metric: Metric, b: Spread, c: Spread, base: list[float], cand: list[float], exact: bool
) -> float:
    """One-sided p in the direction the median moved (exact rows: 0 if they differ, else 1)."""
    if exact:
        return 0.0 if not math.isclose(b.median, c.median, rel_tol=1e-9, abs_tol=1e-12) else 1.0
    worse = _worse(metric, b.median, c.median)
    cand_higher = (worse >= 0) == (metric.better == "lower")
    return mann_whitney(cand, base) if cand_higher else mann_whitney(base, cand)


def thin(metric: Metric, tasks: int | None) -> bool:
    """Whether a run's ``metric`` rests on too few tasks to be more than its slowest task
    (a P95 under 20 tasks, a P99 under 100: ``power.tasks_for``)."""
    quantile = metric.quantile
    return quantile is not None and tasks is not None and 0 < tasks < power.tasks_for(quantile)


def _fewest_tasks(
    metric: Metric,
    scope: Scope,
    key: str,
    base_runs: Sequence[Mapping[str, Any]],
    cand_runs: Sequence[Mapping[str, Any]],
) -> int | None:
    if metric.quantile is None:
        return None
    counts = [
        *_values(base_runs, scope, key, metric.count_path).values(),
        *_values(cand_runs, scope, key, metric.count_path).values(),
    ]
    return int(min(counts)) if counts else None


def _outliers(base: Mapping[int, float], cand: Mapping[int, float]) -> tuple[tuple[str, int], ...]:
    found = (("baseline", _outlier(base)), ("candidate", _outlier(cand)))
    return tuple((side, i) for side, i in found if i is not None)


def _worse(metric: Metric, base: float, cand: float) -> float:
    """How far the candidate's median moved toward worse, in the metric's unit."""
    return cand - base if metric.better == "lower" else base - cand


def _verdict(metric: Metric, row: Row, p: float, alpha: float) -> Verdict:
    """Pass unless the median moved beyond the row's bar and the metric's floor; then the
    (adjusted) p decides between a finding and "inconclusive" (worse) or pass (better)."""
    assert row.baseline is not None and row.candidate is not None
    base = row.baseline.median
    if row.paired:  # the pairs' own change, not the difference of the sides' medians
        moved = paired.moved(row.baseline.values, row.candidate.values)
        worse = _worse(metric, base, base + moved)
    else:
        worse = _worse(metric, base, row.candidate.median)
    if math.isclose(worse, 0.0, abs_tol=1e-12):
        return "pass"
    relative = abs(worse) / abs(base) if base else math.inf
    if relative <= (row.bar or 0.0) or abs(worse) <= metric.floor:
        return "pass"
    if p < alpha:
        return "regression" if worse > 0 else "improvement"
    return "inconclusive" if worse > 0 and relative > (row.wide_bar or 0.0) else "pass"


def mann_whitney(high: Sequence[float], low: Sequence[float]) -> float:
    """One-sided p of the exact Mann-Whitney (rank-sum) test that ``high`` tends to be larger
    than ``low``: the share of all equally likely splits of the pooled values whose rank sum
    for ``high`` is at least the observed one. Ties get mid-ranks and stay exact."""
    n, m = len(high), len(low)
    if not n or not m:
        return 1.0
    ranks = midranks([*high, *low])
    doubled = [round(2 * r) for r in ranks]  # mid-ranks are halves: doubling keeps integers
    observed = sum(doubled[:n])
    if n + m > EXACT_LIMIT:
        return _normal_p(doubled, n, observed)
    tail = sum(ways for s, ways in _rank_sums(tuple(sorted(doubled)), n) if s >= observed)
    return tail / math.comb(n + m, n)


@lru_cache(maxsize=256)
def _rank_sums(doubled: tuple[int, ...], n: int) -> tuple[tuple[int, int], ...]:
    """(sum, ways) for every way to choose ``n`` of the ranks. Without ties the ranks are
    always 2, 4, …, so one table serves every comparison with the same run counts."""
    counts: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(n)]
    for r in doubled:
        for k in range(n, 0, -1):
            target = counts[k]
            for s, ways in counts[k - 1].items():
                target[s + r] = target.get(s + r, 0) + ways
    return tuple(counts[n].items())


def _normal_p(doubled: Sequence[int], n: int, observed: int) -> float:
    total = len(doubled)
    mean = n * sum(doubled) / total
    var = (
        n
        * (total - n)
        / (total * (total - 1))
        * sum((r - sum(doubled) / total) ** 2 for r in doubled)
    )
    if var <= 0:
        return 1.0
    z = (observed - 1 - mean) / math.sqrt(var)  # continuity correction of 1 (doubled ranks: ½)
    return 0.5 * math.erfc(z / math.sqrt(2))


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (in the input order): reject where below alpha,
    and the chance of any false rejection among them stays at alpha."""
    order = sorted(range(len(ps)), key=ps.__getitem__)
    m = len(ps)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):  # q_(k) = max over j ≤ k of (m − j + 1)·p_(j)
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(ps: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg step-up adjusted p-values (in the input order): the expected share
    of false findings among the rejected stays at alpha."""
    order = sorted(range(len(ps)), key=ps.__getitem__)
    m = len(ps)
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):  # q_(k) = min over j ≥ k of p_(j)·m/j
        i = order[rank - 1]
        running = min(running, ps[i] * m / rank)
        adjusted[i] = running
    return adjusted


def _tested(row: Row) -> bool:
    """A gated row whose test could reject. A row whose values are all equal (no errors in
    any run, say) has p = 1 under every permutation: leaving it out of the count is Tarone's
    argument, and keeps a quiet error rate from diluting the latencies' alpha."""
    if not row.gated or row.p is None or row.exact or row.baseline is None:
        return False
    values = {*row.baseline.values, *(row.candidate.values if row.candidate else ())}
    return len(values) > 1


def _corrected(
    rows: list[Row], rules: Rules, adjust: Callable[[Sequence[float]], list[float]]
) -> list[Row]:
    """Adjust the gated rows' p-values for their number and judge them on the adjusted one."""
    tested = [i for i, r in enumerate(rows) if _tested(r)]
    adjusted = dict(zip(tested, adjust([rows[i].p or 0.0 for i in tested]), strict=True))
    out = []
    for i, row in enumerate(rows):
        q = adjusted.get(i)
        if q is None:
            out.append(row)
            continue
        metric = rules.metric(row.metric)
        out.append(replace(row, q=q, verdict=_verdict(metric, row, q, rules.alpha)))
    return out


def tested_count(result: Comparison) -> int:
    """How many rows the correction counted (the m of alpha / m)."""
    return sum(_tested(r) for r in result.rows) if result.correction != "none" else 1


def _with_detectable(row: Row, rules: Rules, level: float) -> Row:
    if not row.gated or row.noise is None or row.baseline is None or row.candidate is None:
        return row
    runs = (row.baseline.n, row.candidate.n)
    threshold = rules.metric(row.metric).threshold
    gate = power.Gate(level, rules.noise_k, threshold, power.DETECT_POWER, row.paired)
    found = power.detectable(row.noise, runs, gate)
    return row if found is None else replace(row, detectable=found)


def _with_power(row: Row, rules: Rules, level: float) -> Row:
    """Judge whether the row could have failed: a gated row whose test could reject
    (``_tested``; rates are gated on their floor in points, not on a relative change)."""
    if not _tested(row) or row.unit in ("rate", "per task") or row.candidate is None:
        return row
    assert row.baseline is not None
    metric = rules.metric(row.metric)
    effect = rules.detect if rules.detect is not None else metric.threshold
    left_out = [side for side, _ in row.outliers]  # the test ran without them
    runs = min(
        row.baseline.n - left_out.count("baseline"), row.candidate.n - left_out.count("candidate")
    )
    gate = power.Gate(level, rules.noise_k, metric.threshold, power.DETECT_POWER, row.paired)
    found = power.sensitivity(effect, row.noise, runs, gate)
    needs = (found.plan.runs, found.plan.repeat) if found.plan else None
    return replace(
        row, detect=effect, underpowered=not found.able, needs=needs, power_note=found.why
    )


_UNPAIRED = (
    "the sides have {} and {} runs, so they cannot be paired round by round: compared "
    "unpaired (rank test across the runs); pair them with as many runs a side"
)


def _warnings(n: int, m: int, alpha: float, pairs: bool = False) -> Iterable[str]:
    if not n or not m:
        yield "one side has no finished runs: nothing can be compared"
        return
    if pairs:
        smallest = paired.smallest_p(n)
        if smallest >= alpha:
            yield (
                f"with {n} pairs of runs the smallest possible p is {smallest:.3f}, not below "
                f"alpha {alpha}: no change can be significant; use --rounds "
                f"{power.fewest_runs(alpha, paired=True)} or more"
            )
        return
    smallest = 1 / math.comb(n + m, n)
    if smallest >= alpha:
        yield (
            f"with {n} and {m} runs the smallest possible p is {smallest:.3f}, not below "
            f"alpha {alpha}: no change can be significant; use --runs 5 or more on both sides"
        )


MIXED_SPREAD = 4.0  # slowest over fastest case median at which a suite counts as mixed


def _mixed_cases(runs: Sequence[Any], rules: Rules) -> Iterable[str]:
    """A suite of very different cases has overall percentiles that fall between its clusters
    (the P50 of 8 fast and 8 slow cases is neither), and a slowdown of the slow cases alone
    barely moves them. Per-case gating is the answer, but not the default: it multiplies the
    tests and rests each case's percentiles on its own few tasks a run, so it is advised."""
    if "case" in rules.scopes:
        return
    medians = {}
    for case in sorted({k for run in runs for k in run.get("cases", {})}):
        values = [_number(run.get("cases", {}).get(case, {}), "latency.p50") for run in runs]
        found = [v for v in values if v]
        if found:
            medians[case] = statistics.median(found)
    if len(medians) < 2:
        return
    fast, slow = min(medians, key=medians.__getitem__), max(medians, key=medians.__getitem__)
    spread = medians[slow] / medians[fast]
    if spread < MIXED_SPREAD:
        return
    tasks = min(
        (int(_number(run.get("cases", {}).get(slow, {}), "latency.n") or 0) for run in runs),
        default=0,
    )
    repeat = math.ceil(power.tasks_for(0.95) / tasks) if tasks else None
    more = f" with --repeat ×{repeat} for 20+ tasks a case a run" if repeat and repeat > 1 else ""
    yield (
        f"the suite mixes cases whose median latencies differ {spread:.0f}× ({fast} "
        f"{1e3 * medians[fast]:.0f} ms … {slow} {1e3 * medians[slow]:.0f} ms): the overall "
        "percentiles fall between them, and a change in the slow cases alone moves them "
        f"little. Gate per case too: --scope cases{more} (not the default: it multiplies the "
        "tests, which the correction pays for in power)"
    )


def _number(metrics: Any, path: str) -> float | None:
    value: Any = metrics
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _thin_percentiles(rows: Sequence[Row], rules: Rules) -> Iterable[str]:
    """A percentile that rests on too few tasks a run is that run's slowest task (a P95 of
    16 tasks is the maximum, and so is its P99): it moves with one task's luck. The default
    gate leaves it out (``thin``), a named one gates it; either way the warning says how
    many tasks a run would make it mean something."""
    for row in rows:
        metric = rules.metric(row.metric)
        declared = metric.name in rules.gate and row.scope in rules.scopes
        if not declared or row.scope != "overall" or not thin(metric, row.tasks):
            continue
        assert metric.quantile is not None and row.tasks is not None  # thin() says so
        needed = power.tasks_for(metric.quantile)
        more = f"multiply --repeat by {math.ceil(needed / row.tasks)} ({needed}+ tasks a run)"
        yield (
            f"{row.metric} rests on {row.tasks} tasks a run: below {needed} a run's "
            f"{row.metric} is its slowest task, which one task's luck moves; "
            + (
                f"{more}, or leave {row.metric} out of --gate"
                if row.gated
                else f"not gated (shown only): {more} to gate it, or name it in --gate to "
                "gate it as it is"
            )
        )
