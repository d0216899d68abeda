"""The Action's history mode (action/history.sh, issue 36) against a local bare repository as
`origin`, no network: each call measures one run, keeps its summary on the perf-history
branch, pushes it, and exits with `perfbench history`'s code over every run kept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import perfbench as perfbench_package
from tests.e2e.test_ab import git
from tests.e2e.test_history_cli import make_runs

ROOT = Path(perfbench_package.__file__).parents[1]
SCRIPT = ROOT / "action" / "history.sh"
BRANCH = "perf-history"


def project(tmp: Path) -> Path:
    """A bare `origin` and a clone of it holding one commit, as actions/checkout leaves it."""
    origin = tmp / "origin.git"
    git(tmp, "init", "-q", "--bare", str(origin))
    repo = tmp / "repo"
    git(tmp, "clone", "-q", str(origin), str(repo))
    for key, value in (("user.name", "t"), ("user.email", "t@example.invalid")):
        git(repo, "config", key, value)
    (repo / "README").write_text("an agent\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "push", "-q", "origin", "HEAD")
    return repo


def kept(tmp: Path) -> list[str]:
    """The files on origin's history branch."""
    listed = git(tmp / "origin.git", "ls-tree", "-r", "--name-only", BRANCH)
    return listed.splitlines()


def history_sh(
    tmp: Path, profile: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The script as the Action runs it, measuring the mock ``profile`` (made by make_runs)."""
    outputs = tmp / "github-output"
    outputs.write_text("")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PB_"))}
    given = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),  # the perfbench under test, whatever is installed
        "RUNNER_TEMP": str(tmp / "runner"), "GITHUB_OUTPUT": str(outputs),
        "PB_TARGET": f"mock:{tmp / profile}.yaml", "PB_CASES": str(tmp / "cases"),
        "PB_RUNS": "1", "PB_REPEAT": "5", "PB_RUN_ARGS": "--warmup 0", **env,
    }  # fmt: skip
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp / "repo", env={**base, **given},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    lines = outputs.read_text().splitlines()
    return done, dict(line.split("=", 1) for line in lines)


def seed(tmp: Path, runs: Path) -> None:
    """Put the summaries of ``runs`` on origin's history branch, as earlier jobs would have."""
    repo, branch = tmp / "repo", tmp / "seed"
    git(repo, "worktree", "add", "-q", "--detach", str(branch), "HEAD")
    git(branch, "checkout", "-q", "--orphan", BRANCH)
    git(branch, "rm", "-rfq", ".")
    for run in sorted(runs.iterdir()):
        (branch / "runs" / run.name).mkdir(parents=True)
        for name in ("meta.json", "summary.json"):
            shutil.copy(run / name, branch / "runs" / run.name / name)
    git(branch, "add", "-A")
    git(branch, "commit", "-q", "-m", "earlier runs")
    git(branch, "push", "-q", "origin", BRANCH)
    git(repo, "worktree", "remove", "--force", str(branch))


def test_the_twelfth_run_of_a_slower_profile_fails_with_history_s_exit_4(tmp_path: Path) -> None:
    """Eleven runs kept (the last five of a profile 25% slower); the job's own run, slower
    too, is the twelfth: history names the seventh as P50's change point and exits 4."""
    project(tmp_path)
    make_runs(tmp_path, "base", [f"v{i:02d}" for i in range(1, 7)], 200, 2)
    make_runs(tmp_path, "slower", [f"w{i:02d}" for i in range(7, 12)], 250, 2.5)
    seed(tmp_path, tmp_path / "runs")
    done, outputs = history_sh(tmp_path, "slower", PB_LABEL="w12", PB_HISTORY_ARGS="--json")
    assert done.returncode == 4, done.stderr + done.stdout
    doc = json.loads(done.stdout[done.stdout.index("{") :])
    p50 = next(s for s in doc["series"] if s["metric"] == "p50")
    assert p50["runs"][-1] == "w12"
    assert [(s["run"], s["direction"]) for s in p50["shifts"]] == [("w07", "slower")]
    files = kept(tmp_path)  # pushed: twelve runs, two small files each
    assert len(files) == 24 and {Path(f).name for f in files} == {"meta.json", "summary.json"}
    assert "regression" in Path(outputs["verdict"]).read_text()
    assert not (tmp_path / "runner" / "perfbench-history" / "branch").exists()  # removed


def test_first_use_starts_the_branch_and_passes_until_there_are_three_runs(
    tmp_path: Path,
) -> None:
    repo = project(tmp_path)
    make_runs(tmp_path, "base", [], 200, 2)  # the profile and the cases only
    summary = tmp_path / "summary.md"
    for n in (1, 2):
        done, outputs = history_sh(tmp_path, "base", GITHUB_STEP_SUMMARY=str(summary))
        assert done.returncode == 0, done.stderr + done.stdout
        assert f"{n} run(s) on {BRANCH} so far; the history starts at 3" in done.stdout
        assert len(kept(tmp_path)) == 2 * n
    assert "starts at 3" in summary.read_text()
    assert Path(outputs["verdict"]).is_file()
    commit = git(repo, "rev-parse", "--short=12", "HEAD")  # the default label: the commit's
    runs = [Path(f).parent.name for f in kept(tmp_path)]
    assert all(name.endswith(f"_{commit}") for name in runs), runs
    assert git(repo, "branch", "--list", BRANCH) == ""  # the user's checkout is left alone


def test_a_pull_request_measures_but_never_pushes(tmp_path: Path) -> None:
    project(tmp_path)
    make_runs(tmp_path, "base", [], 200, 2)
    history_sh(tmp_path, "base")
    done, _ = history_sh(tmp_path, "base", GITHUB_EVENT_NAME="pull_request")
    assert done.returncode == 0, done.stderr
    assert "2 run(s)" in done.stdout and "not pushed" in done.stdout
    assert len(kept(tmp_path)) == 2  # the first run's only


def test_a_push_that_lost_a_race_is_rebased_and_retried(tmp_path: Path) -> None:
    """Another job pushed to the branch after this one fetched it: the server refuses the
    first push (a hook stands in for the race), the script rebases onto the branch and pushes
    again; both jobs' runs are kept."""
    project(tmp_path)
    make_runs(tmp_path, "base", ["v01"], 200, 2)
    seed(tmp_path, tmp_path / "runs")
    hook = tmp_path / "origin.git" / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\n[ -e {tmp_path}/refused ] && exit 0\ntouch {tmp_path}/refused\n"
        "echo 'refused once: fetch first' >&2\nexit 1\n"
    )
    hook.chmod(0o755)
    done, _ = history_sh(tmp_path, "base")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "refused").exists() and len(kept(tmp_path)) == 4


@pytest.mark.parametrize("mode", ["ab", "history"])
def test_the_action_runs_one_mode_and_exits_with_its_code(mode: str) -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    steps = {s.get("id"): s for s in action["runs"]["steps"]}
    assert steps[mode]["if"] == f"inputs.mode == '{mode}'"
    if mode == "history":
        assert "action/history.sh" in steps[mode]["run"]
    code = action["runs"]["steps"][-1]["env"]["PB_CODE"]
    assert f"steps.{mode}.outputs.exit-code" in code
