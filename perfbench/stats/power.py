"""What a comparison can detect, and how many runs (and repeats per run) a change needs. Pure.

The gate (``stats.compare``) flags a metric when two things hold, and both are planned here:

* the rank test on the run-level values gives p below alpha / m (Holm's first step over m
  gated metrics). For a shift of ``d`` (relative) in values whose run-to-run coefficient of
  variation is ``cv``, the t-test needs ``2 (z_a + z_b)^2 (cv/d)^2 + z_a^2/4`` runs a side
  (Guenther's small-sample term); the Mann-Whitney test needs pi/3 times as many (its
  efficiency against the t-test for normal data is 3/pi). An exact rank test with n and m
  runs cannot go below ``1 / C(n+m, n)``, so n is never below the size at which alpha / m
  is reachable at all.
* the observed change of the medians clears the noise bar, ``noise_k × cv``. The difference
  of two medians of n runs spreads by ``cv × sqrt(pi/2 × 2/n)``, so the change must sit
  ``z_b`` of those spreads above the bar: ``d ≥ cv × (noise_k + z_b × sqrt(pi/n))``.

Paired (``Gate.paired``: ``ab``'s rounds, ``stats.paired``): the signed-rank test on n
per-round log-ratios, whose spread is ``sqrt(2) × cv`` with ``cv`` the pairs' own noise
(``paired.noise``: what a round's two runs share is not in it). The one-sample t-test needs
``((z_a + z_b) / shift)^2 + z_a^2/2`` pairs for a shift in the log-ratios' standard
deviations, the signed-rank test pi/3 times as many, never below the n at which 1 / 2^n <
alpha; the median of the log-ratios spreads by ``sqrt(2) cv × sqrt(pi/2n) = cv × sqrt(pi/n)``,
as the unpaired medians do, and its noise is estimated from n − 1 degrees of freedom.

More tasks per run (``--repeat``) lower ``cv`` where the runs differ by sampling (the demo
mock's do: each run draws its own latencies), as 1/sqrt(tasks); they do nothing for a run
factor such as a noisy neighbour, which only more runs average out. The plan assumes the
former and says so.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from statistics import NormalDist

from perfbench.stats import paired as signed

POWER = 0.9  # plans aim at this chance of catching the planned change
DETECT_POWER = 0.8  # "can detect" in compare's output: the conventional 80%
MAX_RUNS = 200
MAX_REPEAT_FACTOR = 64


def pooled_cv(*sides: Sequence[float]) -> float | None:
    """The run-to-run coefficient of variation, pooled over the sides (each about its own
    mean, so a shift between them is not counted as noise): twice the degrees of freedom of
    one side's, and a quiet baseline cannot lower the bar below a noisy candidate's spread."""
    squares = 0.0
    freedom = 0
    for values in sides:
        if len(values) < 2:
            continue
        mean = statistics.fmean(values)
        if not mean:
            continue
        squares += sum(((v - mean) / mean) ** 2 for v in values)
        freedom += len(values) - 1
    return math.sqrt(squares / freedom) if freedom else None


def tasks_for(quantile: float) -> int:
    """The fewest tasks a run for its ``quantile`` (0.95) not to be its slowest task: 20 for
    a P95, 100 for a P99. Below that, a run's P95 is its maximum, and so is its P99."""
    return math.ceil(1 / (1 - quantile) - 1e-9)


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def fewest_runs(alpha: float, paired: bool = False) -> int:
    """The fewest runs a side (``paired``: pairs) with which the exact rank test (the
    signed-rank test) can give p < alpha."""
    n = 1
    while _smallest_p(n, paired) >= alpha:
        n += 1
    return n


def _smallest_p(runs: int, paired: bool) -> float:
    return signed.smallest_p(runs) if paired else 1 / math.comb(2 * runs, runs)


@dataclass(frozen=True)
class Gate:
    """What the gate asks of one metric: p below ``alpha`` (already divided by the metrics'
    number where corrected), a change beyond ``threshold`` and beyond ``noise_k`` run-to-run
    CVs; ``power``: the chance wanted of all of it."""

    alpha: float
    noise_k: float
    threshold: float = 0.0
    power: float = POWER
    paired: bool = False  # ab's rounds: the signed-rank test on per-round ratios


def _test_runs(effect: float, cv: float, gate: Gate) -> float:
    """Runs a side the rank test needs (not rounded): the t-test's, over 3/pi."""
    za, zb = _z(1 - gate.alpha), _z(gate.power)
    if gate.paired:
        return (((za + zb) / _paired_shift(effect, cv)) ** 2 + za**2 / 2) * math.pi / 3
    t_runs = 2 * ((za + zb) * cv / effect) ** 2 + za**2 / 4
    return t_runs * math.pi / 3


def _clears(effect: float, cv: float, runs: float, gate: Gate) -> float:
    """The chance that the observed change of the medians clears the bar, max(threshold,
    noise_k × the CV estimated from the runs): over the threshold, and over the noise term.
    The ratio of the medians spreads by (1 + effect) × cv × sqrt(pi/2 × 2/runs) (the
    candidate's values are 1 + effect times wider, and the baseline's median divides both);
    the estimated CV, from 2 (runs − 1) degrees of freedom, by cv / sqrt(4 (runs − 1)).
    Location and spread estimates are independent, and the two events rise together, so the
    product errs low."""
    normal = NormalDist()
    widen = 1.0 if gate.paired else 1 + effect  # a ratio's spread is the same either side
    medians = widen * cv * math.sqrt(math.pi / runs)
    freedom = max(runs - 1, 1) * (1 if gate.paired else 2)
    estimate = gate.noise_k * cv / math.sqrt(2 * freedom)
    over_threshold = normal.cdf((effect - gate.threshold) / medians)
    over_noise = normal.cdf((effect - gate.noise_k * cv) / math.hypot(medians, estimate))
    return over_threshold * over_noise


def runs_needed(effect: float, cv: float, gate: Gate) -> int | None:
    """Runs a side for ``gate.power`` against a relative change ``effect`` at run-to-run
    ``cv``; None when no number of runs will do (the bar alone is at or above the effect)."""
    if effect <= max(gate.threshold, gate.noise_k * cv):
        return None
    if cv <= 0:
        return fewest_runs(gate.alpha, gate.paired)
    runs = max(fewest_runs(gate.alpha, gate.paired), math.ceil(_test_runs(effect, cv, gate)))
    while runs <= MAX_RUNS and chance(effect, cv, runs, gate) < gate.power:
        runs += 1
    return runs if runs <= MAX_RUNS else None


def chance(effect: float, cv: float, runs: int, gate: Gate) -> float:
    """The chance that ``runs`` a side flag a change of ``effect``: the bar's and the test's,
    multiplied (they rise together, so the product errs low, on the side of more runs)."""
    if gate.paired:
        test = _paired_chance(_paired_shift(effect, cv), runs, gate.alpha)
        return _clears(effect, cv, runs, gate) * test
    # In the baseline's standard deviations, with the candidate's (1 + effect) times wider.
    shift = effect / (cv * math.sqrt((1 + (1 + effect) ** 2) / 2))
    return _clears(effect, cv, runs, gate) * _test_chance(shift, runs, gate.alpha)


def _paired_shift(effect: float, cv: float) -> float:
    """A change of ``effect`` in the log-ratios' standard deviations (sqrt(2) × cv)."""
    return math.log1p(effect) / (cv * math.sqrt(2))


def _paired_chance(shift: float, pairs: int, alpha: float) -> float:
    """The exact signed-rank test's power against a shift of ``shift`` standard deviations
    with ``pairs`` pairs: simulated up to ``SIMULATED_RUNS`` (seeded), as for the rank test,
    the normal formula at its 3/pi efficiency beyond."""
    if pairs > SIMULATED_RUNS:
        za = _z(1 - alpha)
        return NormalDist().cdf(shift * math.sqrt(max(3 * pairs / math.pi - za**2 / 2, 0)) - za)
    return _simulated_pairs(round(shift, 2), pairs, alpha)


@lru_cache(maxsize=4096)
def _simulated_pairs(shift: float, pairs: int, alpha: float) -> float:
    rng = random.Random(pairs)  # the same draws for every shift: power rises smoothly with it
    critical = signed.critical(pairs, alpha)
    hits = 0
    for _ in range(DRAWS):
        diffs = [rng.gauss(shift, 1) for _ in range(pairs)]
        ranked = sorted(range(pairs), key=lambda i: abs(diffs[i]))
        hits += sum(r + 1 for r, i in enumerate(ranked) if diffs[i] > 0) >= critical
    return hits / DRAWS


def _test_chance(shift: float, runs: int, alpha: float) -> float:
    """The exact rank test's power against a shift of ``shift`` standard deviations, with
    ``runs`` a side. Up to ``SIMULATED_RUNS`` it is simulated (seeded, so a plan is always
    the same): there the test's few attainable p-values make the normal formula promise too
    much (5 vs 5 at alpha 0.006 needs every candidate run above every baseline run)."""
    if runs > SIMULATED_RUNS:
        za = _z(1 - alpha)
        return NormalDist().cdf(shift * math.sqrt(max(3 * runs / math.pi - za**2 / 4, 0) / 2) - za)
    return _simulated(round(shift, 2), runs, alpha)


SIMULATED_RUNS = 15
DRAWS = 400


@lru_cache(maxsize=4096)
def _simulated(shift: float, runs: int, alpha: float) -> float:
    rng = random.Random(runs)  # the same draws for every shift: power rises smoothly with it
    critical = _critical_u(runs, alpha)
    hits = 0
    for _ in range(DRAWS):
        base = [rng.gauss(0, 1) for _ in range(runs)]
        cand = [rng.gauss(shift, 1) for _ in range(runs)]
        hits += sum(c > b for c in cand for b in base) >= critical
    return hits / DRAWS


@lru_cache(maxsize=256)
def _critical_u(runs: int, alpha: float) -> int:
    """The smallest Mann-Whitney U (pairs where the candidate is higher) whose exact one-sided
    p is below ``alpha``, with ``runs`` a side and no ties."""
    # ways[k][u]: subsets of size k of the ranks seen so far with u pairs won (a DP over ranks)
    ways: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(runs)]
    for seen in range(2 * runs):
        for k in range(min(seen + 1, runs), 0, -1):
            for u, count in ways[k - 1].items():
                won = u + (seen - (k - 1))  # the new, highest rank beats the others below it
                ways[k][won] = ways[k].get(won, 0) + count
    total = math.comb(2 * runs, runs)
    tail = 0
    for u in sorted(ways[runs], reverse=True):
        if (tail + ways[runs][u]) / total >= alpha:
            return u + 1
        tail += ways[runs][u]
    return 0


@dataclass(frozen=True)
class Plan:
    """Runs a side and ``--repeat``, and the run-to-run CV expected at that repeat."""

    runs: int
    repeat: int
    cv: float

    @property
    def cost(self) -> int:
        return self.runs * self.repeat


def plan(effect: float, cv: float, repeat: int, gate: Gate, least_factor: int = 1) -> Plan | None:
    """The cheapest (runs × repeat, then fewer repeats) way to catch ``effect``, given the
    ``cv`` measured at ``repeat``; None when even 64 times the repeat would not do.
    ``least_factor``: the repeat must grow at least this much (a percentile's tasks)."""
    best: Plan | None = None
    for factor in range(least_factor, least_factor + MAX_REPEAT_FACTOR):
        scaled = cv / math.sqrt(factor)  # sampling noise: 1/sqrt(tasks per run)
        runs = runs_needed(effect, scaled, gate)
        if runs is None:
            continue
        found = Plan(runs, repeat * factor, scaled)
        if best is None or found.cost < best.cost:
            best = found
        # More repeats cannot lower the runs any further:
        if runs == fewest_runs(gate.alpha, gate.paired):
            break
    return best


def detectable(cv: float, runs: tuple[int, int], gate: Gate) -> float | None:
    """The smallest relative change this many runs a side catch with ``gate.power`` at this
    noise; None when the exact test cannot reach ``gate.alpha`` with so few runs. Unequal
    sides count as the smaller one (a little pessimistic)."""
    n = min(runs)
    if not n or _smallest_p(n, gate.paired) >= gate.alpha:
        return None
    low = max(gate.threshold, gate.noise_k * cv)
    if cv <= 0:
        return low
    high = low + 20 * cv
    for _ in range(24):  # bisection: chance rises with the effect
        middle = (low + high) / 2
        low, high = (low, middle) if chance(middle, cv, n, gate) >= gate.power else (middle, high)
    return high


@dataclass(frozen=True)
class Need:
    """What one metric needs to show a change: a plan, or why there is none; ``note`` is
    advice beside it (a threshold that would hide the change, a percentile's tasks)."""

    metric: str
    cv: float | None  # measured run-to-run coefficient of variation
    plan: Plan | None
    note: str = ""


@dataclass(frozen=True)
class Measured:
    """A metric's run-level values, grouped by the run directory they came from (each group
    about its own mean: directories made apart may differ by more than noise)."""

    metric: str
    groups: tuple[tuple[float, ...], ...]
    threshold: float  # the gate's relative threshold for it
    quantile: float | None = None  # 0.95 for a P95
    tasks: int | None = None  # fewest tasks a run behind it


def need(measured: Measured, effect: float, repeat: int, gate: Gate) -> Need:
    """Runs a side and ``--repeat`` for ``measured`` to show a change of ``effect``;
    ``gate.threshold`` is taken from ``measured``."""
    cv = pooled_cv(*measured.groups)
    name = measured.metric
    if cv is None:
        return Need(name, None, None, "needs 2 or more runs to measure its noise")
    least = 1
    notes = []
    if measured.quantile is not None and measured.tasks:
        wanted = tasks_for(measured.quantile)
        least = max(1, math.ceil(wanted / measured.tasks))
        if least > 1:
            notes.append(f"{wanted}+ tasks a run, or it is each run's slowest task")
    if effect <= measured.threshold:
        # The reason first: no number of runs can help, and noise is not why (issue 37).
        notes.insert(
            0,
            f"a {100 * effect:g}% change is within its {100 * measured.threshold:g}% threshold, "
            f"which the gate passes at any number of runs; to gate it: --max-regression "
            f"{name}={100 * effect / 2:g}%",
        )
        return Need(name, cv, None, "; ".join(notes))
    found = plan(effect, cv, repeat, replace(gate, threshold=measured.threshold), least)
    if found is None:
        notes.insert(0, "out of reach within 200 runs a side and 64 times the repeat")
    return Need(name, cv, found, "; ".join(notes))


@dataclass(frozen=True)
class Sensitivity:
    """Whether a comparison's runs could have flagged a change of ``effect`` in one metric
    (``able``), and the cheapest runs a side and ``--repeat`` factor that would (``plan``;
    None: out of reach, ``why`` says why)."""

    effect: float
    able: bool
    plan: Plan | None
    why: str = ""


def sensitivity(effect: float, cv: float | None, runs: int, gate: Gate) -> Sensitivity:
    """Could ``runs`` a side, at run-to-run ``cv``, flag a change of ``effect`` with
    ``gate.power``? A change exactly at the gate's threshold is the declared one by default:
    there the threshold is the boundary (half of such changes land below it), so only the
    noise bar and the test are asked of it; a declared change above the threshold must also
    clear it, and one below it never can."""
    if effect < gate.threshold - 1e-12:
        why = f"within its {100 * gate.threshold:g}% threshold, which the gate passes"
        return Sensitivity(effect, False, None, why)
    if cv is None:
        return Sensitivity(effect, False, None, "needs 2 or more runs a side to measure noise")
    asked = gate if effect > gate.threshold + 1e-12 else replace(gate, threshold=0.0)
    able = runs >= fewest_runs(asked.alpha, asked.paired) and (
        cv <= 0 or chance(effect, cv, runs, asked) >= asked.power
    )
    found = plan(effect, cv, 1, asked)
    why = "" if found else "out of reach within 200 runs a side and 64 times the repeat"
    return Sensitivity(effect, able, found, why)
