"""Targets: what perfbench measures. A target has one async method, ``run(task) -> Sample``;
it records its steps on the task and returns the finished sample. Failures of the system under
test come back as samples with a non-``ok`` status; only perfbench's own bugs raise."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Protocol

from perfbench.sample import Sample
from perfbench.task import Task


class Target(Protocol):
    @property
    def name(self) -> str:
        """A short, key-free description stored in the run (``mock:default``)."""
        ...

    async def run(self, task: Task) -> Sample: ...


async def open_target(target: Target, stack: AsyncExitStack) -> None:
    """Start a target that has a lifetime (a server to spawn, clients to close)."""
    if isinstance(target, AbstractAsyncContextManager):
        await stack.enter_async_context(target)
    aclose = getattr(target, "aclose", None)
    if aclose is not None:
        stack.push_async_callback(aclose)
    prepare = getattr(target, "prepare", None)
    if prepare is not None:  # clients made now, not in the first measured task
        prepare()
