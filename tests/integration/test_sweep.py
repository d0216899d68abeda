"""Sweeps under virtual time against the in-process mock: the rate-limit knee, no false knee
without a limit, the USL fit and the Markdown summary; plus the pure knee functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench.engine.sweep import Sweep
from perfbench.report import sweep as sweep_report
from perfbench.report.sweep_md import render
from perfbench.spec import Plan, SweepPlan, SweepSpec
from perfbench.stats.knee import Level, StopRule, kneedle, usl, verdict
from perfbench.suite import Suite, load_suite
from perfbench.targets.mock import MockAgent
from tests.helpers import fixed_profile, write_suite

ONE = "cases:\n  - {id: c, language: en, input: hello, timeout_s: 30}\n"


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite([write_suite(tmp_path / "s.yaml", ONE)])


@pytest.mark.anyio
async def test_auto_sweep_finds_the_concurrency_limit(suite: Suite, tmp_path: Path) -> None:
    profile = fixed_profile(rate_limits={"concurrent": 16})
    plan = SweepPlan(base=Plan(runs=1, warmup=0, repeat=96), max_level=256)
    spec = SweepSpec(plan=plan, out=str(tmp_path / "runs"))
    sweep = Sweep(
        spec, suite=suite, factory=lambda n: MockAgent(profile), publish=sweep_report.write
    )
    result = await sweep.run()
    levels = [v.level for v in result.levels]
    # Doubling until 32 shows 429s, then bisection between 16 and 32 down to 17.
    assert levels == [1, 2, 4, 8, 16, 17, 18, 20, 24, 32]
    assert result.findings["knee"] == 16
    assert all("429" in why for why in result.findings["stopped_by"].values())
    assert result.findings["client_bound_levels"] == []
    assert result.path is not None
    doc = json.loads((result.path / "sweep.json").read_text())
    assert doc["findings"]["knee"] == 16
    assert (result.path / "level-16" / "samples.jsonl").is_file()
    assert doc["findings"]["knee_kind"] == "rate-limit"  # a concurrency cap answers 429s
    assert "Rate-limit knee at 16" in (result.path / "sweep.md").read_text()
    png, svg = result.path / "sweep.png", result.path / "sweep.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg.read_bytes()[:500]


def test_sweep_chart_bytes_are_deterministic(tmp_path: Path) -> None:
    from perfbench.report.charts import sweep_chart

    levels = [lv(n, 10 * n / (1 + 0.05 * (n - 1))) for n in (1, 2, 4, 8, 16)]
    first = sweep_chart(levels, 8, tmp_path / "a", "concurrency")
    second = sweep_chart(levels, 8, tmp_path / "b", "concurrency")
    for one, two in zip(first, second, strict=True):
        assert one.read_bytes() == two.read_bytes()


@pytest.mark.anyio
async def test_no_limit_no_false_knee(suite: Suite, tmp_path: Path) -> None:
    plan = SweepPlan(base=Plan(runs=1, warmup=0, repeat=64), levels=(1, 2, 4, 8, 16, 32))
    spec = SweepSpec(plan=plan, out=str(tmp_path / "runs"))
    sweep = Sweep(spec, suite=suite, factory=lambda n: MockAgent(fixed_profile()))
    result = await sweep.run()
    assert result.findings["knee"] is None
    thr = [v.throughput for v in result.levels]
    assert thr == sorted(thr)  # keeps scaling: every level is N / 0.390 s
    assert thr[-1] == pytest.approx(32 / 0.390, rel=1e-6)


def lv(n: float, x: float, p95: float = 0.1, err: float = 0.0) -> Level:
    return Level(n, x, p95 / 2, p95, p95, p95 / 2, err, 0.0, tasks=8 * n)


def test_verdict_rules() -> None:
    rule = StopRule()
    assert verdict([lv(1, 10), lv(2, 19)], rule) is None
    assert "gained under" in (verdict([lv(1, 10), lv(2, 10.5)], rule) or "")
    # A bisection step (not a doubling) only has to keep the throughput it had.
    assert verdict([lv(8, 80), lv(16, 150), lv(12, 140)], rule) is None
    assert "fell" in (verdict([lv(8, 80), lv(16, 150), lv(12, 120)], rule) or "")
    assert "P95" in (verdict([lv(1, 10), lv(2, 19, p95=0.4)], rule) or "")
    assert "errors" in (verdict([lv(1, 10), lv(2, 19, err=0.02)], rule) or "")


def test_usl_recovers_known_parameters_and_kneedle_finds_the_bend() -> None:
    sigma, kappa, lam = 0.05, 0.002, 10.0
    ns = [1, 2, 4, 8, 16, 32, 64]
    levels = [lv(n, lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))) for n in ns]
    fit = usl(levels)
    assert fit is not None
    assert fit.sigma == pytest.approx(sigma, rel=1e-6) and fit.kappa == pytest.approx(
        kappa, rel=1e-6
    )
    assert fit.n_star == pytest.approx(((1 - sigma) / kappa) ** 0.5, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert usl(levels[:5]) is None  # needs 6 levels
    assert kneedle(levels) in (8, 16)


def test_littles_law_flags_a_client_that_could_not_keep_n_in_flight() -> None:
    from perfbench.stats.knee import client_bound

    # 16 planned in flight, 100 ms each: 160 tasks/s if the client kept up; it managed 80.
    starved = Level(16, 80.0, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0, tasks=640)
    full = Level(16, 158.0, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0, tasks=640)
    short = Level(16, 80.0, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0, tasks=40)  # too few tasks to judge
    assert [client_bound(v) for v in (starved, full, short)] == [True, False, False]


@pytest.mark.anyio
async def test_rate_sweep_runs_open_loop_levels(suite: Suite, tmp_path: Path) -> None:
    plan = SweepPlan(base=Plan(runs=1, warmup=0, repeat=20), levels=(5, 10, 20), rates=True)
    spec = SweepSpec(plan=plan, out=str(tmp_path / "runs"))
    factory, publish = (lambda n: MockAgent(fixed_profile())), sweep_report.write
    result = await Sweep(spec, suite=suite, factory=factory, publish=publish).run()
    assert [v.level for v in result.levels] == [5, 10, 20]
    assert result.findings["client_bound_levels"] == []  # not judged for rates
    # 20 tasks at R tasks/s, each 0.390 s: the window is 19/R + 0.390 s.
    for v in result.levels:
        assert v.throughput == pytest.approx(20 / (19 / v.level + 0.390), rel=1e-6)
    assert result.path is not None
    assert "# Sweep over tasks/s" in (result.path / "sweep.md").read_text()


@pytest.mark.anyio
async def test_the_shipped_rate_limit_knee_example_finds_a_rate_limit_knee(
    example_suite: Suite, tmp_path: Path
) -> None:
    """The README's sweep example (`perfbench sweep cases/ -t mock+http:rate-limit-knee
    --runs 1`), in process and virtual time: 1, 2 and 4 grow under the 30 requests/s limit,
    8 draws 429s, and the knee between them is named a rate-limit knee."""
    from perfbench.mock.profile import load_profile

    profile = load_profile("rate-limit-knee")
    spec = SweepSpec(plan=SweepPlan(base=Plan(runs=1)), out=str(tmp_path / "runs"))
    factory, publish = (lambda n: MockAgent(profile)), sweep_report.write
    sweep = Sweep(spec, suite=example_suite, factory=factory, publish=publish)
    result = await sweep.run()
    by_level = {v.level: v for v in result.levels}
    assert [by_level[n].throttle_rate for n in (1, 2, 4)] == [0, 0, 0]
    assert by_level[8].throttle_rate > StopRule().error_budget
    assert 4 <= result.findings["knee"] < 8
    assert result.findings["knee_kind"] == "rate-limit"
    assert result.path is not None
    text = (result.path / "sweep.md").read_text()
    assert f"Rate-limit knee at {result.findings['knee']:g} (concurrency)" in text
    assert json.loads((result.path / "sweep.json").read_text())["findings"]["knee_kind"] == (
        "rate-limit"
    )


@pytest.mark.anyio
async def test_the_engine_stores_the_sweep_and_its_caller_renders_it(
    suite: Suite, tmp_path: Path
) -> None:
    """Without a publisher the engine writes sweep.json and no report; a publisher that fails
    leaves the sweep `running`, and --resume publishes it from the levels kept."""
    from perfbench.errors import StoreError
    from perfbench.store.sweeps import PLAN_FILE, read_plan

    plan = SweepPlan(base=Plan(runs=1, warmup=0, repeat=4), levels=(1, 2))
    spec = SweepSpec(plan=plan, out=str(tmp_path / "runs"))
    factory = lambda n: MockAgent(fixed_profile())  # noqa: E731
    quiet = await Sweep(spec, suite=suite, factory=factory).run()
    assert (quiet.path / "sweep.json").is_file() and not (quiet.path / "sweep.md").exists()
    assert json.loads((quiet.path / PLAN_FILE).read_text())["status"] == "completed"

    def broken(result: object) -> None:
        raise StoreError("disk full")

    with pytest.raises(StoreError, match="disk full"):
        await Sweep(spec, suite=suite, factory=factory, publish=broken).run()
    (path,) = [p for p in (tmp_path / "runs").iterdir() if p != quiet.path]
    assert json.loads((path / PLAN_FILE).read_text())["status"] == "running"
    again = SweepSpec.from_doc(read_plan(path))
    publish = sweep_report.write
    result = await Sweep(again, suite=suite, factory=factory, path=path, publish=publish).run()
    assert [v.level for v in result.levels] == [1, 2]
    assert (path / "sweep.md").read_text() == render(result)
    assert json.loads((path / PLAN_FILE).read_text())["status"] == "completed"
