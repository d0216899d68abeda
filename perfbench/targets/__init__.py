"""Targets: what perfbench measures. A target has one async method, ``run(task) -> Sample``;
it records its steps on the task and returns the finished sample. Failures of the system under
test come back as samples with a non-``ok`` status; only perfbench's own bugs raise."""

from __future__ import annotations

from typing import Protocol

from perfbench.errors import TargetError
from perfbench.sample import Sample
from perfbench.task import Task


class Target(Protocol):
    @property
    def name(self) -> str:
        """A short, key-free description stored in the run (``mock:default``)."""
        ...

    async def run(self, task: Task) -> Sample: ...


def resolve(spec: str) -> Target:
    """A target from its string: ``mock`` or ``mock:<profile name or path>``."""
    kind, _, arg = spec.partition(":")
    if kind == "mock":
        from perfbench.mock.profile import load_profile
        from perfbench.targets.mock import MockAgent

        return MockAgent(load_profile(arg or "default"), profile_name=arg or "default")
    raise TargetError(f"unknown target '{spec}'; known: mock, mock:<profile>")
