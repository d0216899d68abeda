"""The run spec: one description of a run, through meta.json and back, for every load shape;
and the shapes older run directories recorded (resume must still take them up)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench.load import Adaptive, Rate
from perfbench.spec import Plan, RunSpec, SweepPlan, SweepSpec, TargetSpec
from perfbench.stats.knee import StopRule

TARGET = TargetSpec("openai/gpt-4o", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY",
                    stream=False, retries=0, check_tokens=True,
                    headers=("X-Team: perf", "X-Token: ${TOKEN}"))  # fmt: skip


@pytest.mark.parametrize(
    "load",
    [None, Adaptive(start=2, maximum=64, decrease=0.5), Rate(5.0, "poisson", 10.0, 8)],
    ids=["fixed", "adaptive", "rate"],
)
def test_a_run_spec_round_trips_through_json(load: Adaptive | Rate | None) -> None:
    plan = Plan(runs=3, warmup=0, repeat=2, concurrency=4, seed=7, load=load, workers=2,
                ramp_up=None)  # fmt: skip
    spec = RunSpec(("/cases",), TARGET, plan, label="v1", prices="/p.yaml", out="/runs")
    assert RunSpec.from_doc(json.loads(json.dumps(spec.to_doc()))) == spec


def test_build_makes_paths_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perfbench.prices.yaml").write_text("date: 2026-11-01\nprices: []\n")
    spec = RunSpec.build([Path("cases")], TargetSpec(), Plan(), out=Path("runs"))
    assert spec.cases == (str(tmp_path / "cases"),)
    # The working directory's price file is taken when the run starts, so a resume from
    # another folder prices the same way.
    assert spec.prices == str(tmp_path / "perfbench.prices.yaml")


def test_a_run_directory_from_before_specs_can_still_be_resumed(tmp_path: Path) -> None:
    meta = {
        "label": "old",
        "plan": {
            "runs": 2,
            "warmup": 1,
            "repeat": 1,
            "concurrency": 1,
            "seed": 3,
            "load": {"start": 1, "maximum": 32, "decrease": 0.8, "cooldown_s": 1.0},
            "workers": 1,
            "ramp_up": 0.0,
        },
        "load": {"shape": "adaptive"},
        "invocation": {
            "cases": ["/c"],
            "target": "mock+http",
            "options": {
                "base_url": None,
                "api_key_env": None,
                "stream": False,
                "concurrency": 32,
                "seed": 3,
                "retries": 1,
                "check_tokens": False,
                "server_url": None,
            },
            "prices": None,
        },
    }
    spec = RunSpec.of_run(tmp_path / "run", meta)
    assert spec.target == TargetSpec("mock+http", stream=False, retries=1)
    assert spec.plan.load == Adaptive(start=1, maximum=32)
    assert (spec.plan.seed, spec.label, spec.out) == (3, "old", str(tmp_path))


def test_a_sweep_spec_round_trips_and_makes_each_level_a_run() -> None:
    plan = SweepPlan(Plan(runs=2, seed=4), levels=(1, 8), rule=StopRule(0.05, 2.0, 0.2),
                     slo=("p95", 2.0), workers=0)  # fmt: skip
    spec = SweepSpec(("/c",), TARGET, plan, label="v2", out="/runs")
    assert SweepSpec.from_doc(json.loads(json.dumps(spec.to_doc()))) == spec
    level = spec.level(8)
    assert level.target == TARGET and level.label == "v2"
    assert (level.plan.concurrency, level.plan.runs, level.plan.seed) == (8, 2, 4)
    assert spec.level(8, workers=False).plan.workers == 1
    rates = SweepSpec(plan=SweepPlan(Plan(), levels=(5,), rates=True)).level(5)
    assert rates.plan.load == Rate(per_second=5)


def test_a_sweep_plan_from_before_specs_reads_its_target_options() -> None:
    doc = {
        "cases": ["/c"],
        "target": "mock:zero",
        "options": {"base_url": None, "api_key_env": "K", "seed": 9},
        "plan": {
            "base": {
                "runs": 1,
                "warmup": 0,
                "repeat": 1,
                "concurrency": 1,
                "seed": 0,
                "workers": 1,
                "ramp_up": 0.0,
            },
            "levels": [1, 2],
            "rates": False,
            "max_level": 1024,
            "rule": {"error_budget": 0.01, "p95_factor": 3.0, "min_gain": 0.1},
            "bisect_steps": 4,
            "slo": None,
            "workers": 2,
        },
    }
    spec = SweepSpec.from_doc(doc)
    assert spec.target == TargetSpec("mock:zero", api_key_env="K")
    assert spec.plan.base.seed == 9 and spec.plan.workers == 2


def test_a_sweep_slo_is_a_latency_threshold() -> None:
    from perfbench.errors import GateError
    from perfbench.stats.thresholds import parse_slo

    assert parse_slo("p99<800ms") == ("p99", pytest.approx(0.8))
    assert parse_slo("p95 <= 2s") == ("p95", 2.0)
    for wrong in ("error_rate<1%", "p95>2s", "p95{case=a}<1s", "p95 over 2"):
        with pytest.raises(GateError, match=r"latency limit|write METRIC"):
            parse_slo(wrong)
