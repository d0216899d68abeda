"""The composite GitHub Action (action.yml at the repository's root), checked as data: the keys
GitHub requires, a shell for every script step, every `${{ inputs.X }}` declared, and the
verdict's exit code as the job's. No network: GitHub itself is not asked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ACTION = Path(__file__).resolve().parents[2] / "action.yml"
INPUT_REFERENCE = re.compile(r"\binputs\.([A-Za-z0-9_-]+)")
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_it_is_a_composite_action_with_the_required_keys(action: dict[str, Any]) -> None:
    assert {"name", "description", "inputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert steps and all(("run" in s) != ("uses" in s) for s in steps)
    assert all(s.get("shell") for s in steps if "run" in s)


def test_inputs_are_described_and_every_reference_is_declared(action: dict[str, Any]) -> None:
    inputs = action["inputs"]
    for name, spec in inputs.items():
        assert spec.get("description"), name
        assert spec.get("required") or "default" in spec, name
    referenced = set()
    for expression in EXPRESSION.findall(ACTION.read_text(encoding="utf-8")):
        referenced |= set(INPUT_REFERENCE.findall(expression))
    assert referenced <= set(inputs), referenced - set(inputs)
    wanted = {"target", "cases", "baseline-ref", "rounds", "repeat", "compare-args"}
    assert wanted | {"comment-on-pr", "python-version"} <= set(inputs)
    assert inputs["target"]["required"] is True


def test_script_steps_take_inputs_from_the_environment_not_pasted_in(
    action: dict[str, Any],
) -> None:
    """An input pasted into a script is shell code (a quote or $(…) in it runs); through the
    step's env it stays a value."""
    for step in action["runs"]["steps"]:
        assert not EXPRESSION.search(step.get("run", "")), step["name"]


def test_it_installs_itself_runs_ab_and_exits_with_its_code(action: dict[str, Any]) -> None:
    steps = action["runs"]["steps"]
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert 'pip install --quiet --disable-pip-version-check "$GITHUB_ACTION_PATH"' in scripts
    measure = next(s for s in steps if s.get("id") == "ab")
    assert "perfbench ab --baseline" in measure["run"]
    assert "github.event.pull_request.base.sha" in measure["env"]["PB_BASELINE"]
    comment = next(s for s in steps if "gh pr comment" in s.get("run", ""))
    assert "inputs.comment-on-pr == 'true'" in comment["if"]
    assert comment["env"]["GH_TOKEN"] == "${{ inputs.github-token }}"
    assert steps[-1]["run"] == 'exit "${PB_CODE:-3}"'
    assert "steps.ab.outputs.exit-code" in steps[-1]["env"]["PB_CODE"]


def test_every_script_is_valid_bash(action: dict[str, Any]) -> None:
    """`bash -n` parses a script without running it."""
    for step in action["runs"]["steps"]:
        if "run" in step:
            checked = subprocess.run(
                ["bash", "-n", "-c", step["run"]], capture_output=True, text=True, timeout=10
            )
            assert checked.returncode == 0, (step["name"], checked.stderr)


def test_a_comment_that_cannot_be_posted_never_fails_the_job(
    action: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 36: a fork's pull request gets a read-only token, and `gh pr comment` fails; the
    step warns and succeeds, so the job's result is the verdict's."""
    step = next(s for s in action["runs"]["steps"] if "gh pr comment" in s.get("run", ""))
    fake = tmp_path / "gh"
    fake.write_text(
        "#!/bin/sh\necho 'HTTP 403: Resource not accessible by integration' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "PB_PR": "7", "GITHUB_REPOSITORY": "o/r",
           "PB_VERDICT": str(tmp_path / "verdict.md")}  # fmt: skip
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "::warning::could not comment on the pull request" in done.stdout
