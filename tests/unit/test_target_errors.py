"""The unknown-target error lists every kind of target (cmd: and http+agent:// were missing)
and suggests the nearest; --ray's help shows the extra to install (rich ate `[ray]`)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from perfbench.cli import app
from perfbench.errors import TargetError
from perfbench.targets.registry import resolve
from perfbench.targets.target_spec import TargetSpec


@pytest.mark.parametrize(
    ("typed", "nearest"),
    [("opneai/gpt-4o", "openai/gpt-4o"), ("cmdd:python a.py", "cmd:python a.py"),
     ("antrhopic/claude", "anthropic/claude")],
)  # fmt: skip
def test_a_typo_is_answered_with_every_kind_and_the_nearest(typed: str, nearest: str) -> None:
    with pytest.raises(TargetError) as caught:
        resolve(TargetSpec(typed))
    said = str(caught.value)
    for kind in ("mock[:profile]", "mock+http", "openai/<model>", "cmd:<command>",
                 "http+agent://", "python:module:function"):  # fmt: skip
        assert kind in said
    assert said.endswith(f"Did you mean '{nearest}'?")


def test_nothing_near_is_not_guessed() -> None:
    with pytest.raises(TargetError) as caught:
        resolve(TargetSpec("zzzzqqq"))
    assert "Did you mean" not in str(caught.value)


def test_the_ray_help_names_the_extra() -> None:
    shown = CliRunner().invoke(app, ["run", "--help"], terminal_width=250).output
    assert "pip install 'perfbench-llm[ray]'" in " ".join(shown.replace("│", " ").split())
