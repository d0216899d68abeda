"""`perfbench ab`'s planning, pure: the interleaved schedule, each run's command line and
environment, the extra flags it refuses, and the gate flags it takes over from compare."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import pytest

from perfbench import ab
from perfbench.cli import ab as ab_cli
from perfbench.cli import compare as compare_cli
from perfbench.errors import AbError


def test_every_round_runs_both_sides_the_first_one_alternating() -> None:
    slots = ab.schedule(4)
    assert [(s.round, s.side[0]) for s in slots] == [
        (1, "b"), (1, "c"), (2, "c"), (2, "b"), (3, "b"), (3, "c"), (4, "c"), (4, "b"),
    ]  # fmt: skip
    # A steady drift (each slot a little slower than the last) costs both sides the same.
    positions = {side: sum(i for i, s in enumerate(slots) if s.side == side) for side in ab.SIDES}
    assert positions["baseline"] == positions["candidate"]


def test_confirmation_rounds_go_on_from_the_last_round_alternating_the_same_way() -> None:
    slots = ab.schedule(2, first=5)
    assert [(s.round, s.side[0]) for s in slots] == [(5, "b"), (5, "c"), (6, "c"), (6, "b")]
    command = ab.run_command([Path("/s")], slots[0], Path("/o"), [], ab.CONFIRM)
    assert command[command.index("--label") + 1] == "baseline-confirm"


def test_a_run_is_one_measured_pass_labelled_with_its_side_and_seeded_as_every_other() -> None:
    """Common random numbers (issue 36): every round of both sides has the same seed, so a
    simulated model draws the same values in all of them, and the runs differ by the code and
    the machine only; a --seed given after `--` comes last, and the last one counts."""
    command = ab.run_command(
        [Path("/t/suite/0/cases")], ab.Slot(3, "candidate"), Path("/t/runs"), ["-t", "x"]
    )
    assert command[:4] == [sys.executable, "-m", "perfbench", "run"]
    assert command[4:] == [
        "/t/suite/0/cases", "--runs", "1", "--seed", "1", "--label", "candidate",
        "--out", "/t/runs", "-q", "-t", "x",
    ]  # fmt: skip
    seeds = {
        tuple(ab.run_command([Path("/s")], slot, Path("/o"), ["--seed", "7"], suffix))
        for slot in ab.schedule(8) for suffix in ("", ab.CONFIRM)
    }  # fmt: skip
    assert {c[c.index("--seed") + 1] for c in seeds} == {"1"}
    assert all(c[-2:] == ("--seed", "7") for c in seeds)


def test_the_side_s_folders_come_first_on_the_import_path() -> None:
    side = ab.Side("baseline", "main", "abc", Path("/w/baseline/svc"))
    env = ab.side_env(side, {"PYTHONPATH": "/other", "HOME": "/h"}, [".", "src"])
    assert env["PYTHONPATH"].split(os.pathsep) == [
        "/w/baseline/svc",
        "/w/baseline/svc/src",
        "/other",
    ]
    assert env["HOME"] == "/h"
    assert ab.side_env(side, {}, ["."])["PYTHONPATH"] == "/w/baseline/svc"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["cases/"], "not a flag"),
        (["--runs", "3"], "--runs is set by perfbench ab"),
        (["--retries", "0", "--label=x"], "--label is set by perfbench ab"),
        (["--json"], "--json is set"),
    ],
)
def test_extra_flags_that_would_undo_the_pooling_are_refused(
    extra: list[str], message: str
) -> None:
    with pytest.raises(AbError, match=message):
        ab.check_extra(extra)


def test_extra_run_flags_pass() -> None:
    ab.check_extra([])
    ab.check_extra(["--retries", "0", "-H", "X-Tenant: perf", "--rate", "5"])


def test_ab_takes_compare_s_gate_flags_as_they_are() -> None:
    """Read from compare's signature: a gate flag added to compare is one of ab's too."""
    compare = inspect.signature(compare_cli.compare_, eval_str=True).parameters
    gate = {f.name: f for f in ab_cli.GATE}
    assert set(gate) == set(compare) - {
        "baseline_ref", "candidate_ref", "root", "markdown_file", "force", "paired"
    }  # fmt: skip
    for name, flag in gate.items():
        assert flag.default == compare[name].default
        ours, theirs = flag.kind.__metadata__[0], compare[name].annotation.__metadata__[0]
        assert ours.param_decls == theirs.param_decls and ours.help == theirs.help
        assert ours.rich_help_panel == "Gate (as perfbench compare)"
        assert theirs.rich_help_panel != ours.rich_help_panel  # compare's own stays as it was


@pytest.mark.parametrize(
    ("suite", "repeat"),
    [("cases", 2), ("cases/answer.yaml", 8), ("cases/answer.yaml cases/plan.yaml", 4)],
)
def test_the_default_repeat_makes_32_tasks_a_run_and_at_least_two_passes(
    suite: str, repeat: int
) -> None:
    """Issue 36: 16 demo cases need 2 passes, 4 need 8 (their run's jitter averaged over 32
    tasks, and 20+ for a P95), 8 need 4."""
    root = Path(ab.__file__).parents[1]
    assert ab_cli._default_repeat([root / p for p in suite.split()]) == repeat
