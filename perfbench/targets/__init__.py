"""Targets: what perfbench measures. A target has one async method, ``run(task) -> Sample``;
it records its steps on the task and returns the finished sample. Failures of the system under
test come back as samples with a non-``ok`` status and an ``error_kind`` from
``sample.ERROR_KINDS``; only perfbench's own bugs raise.

Every target has the same lifecycle, with no-op defaults (as httpx's transports do): the
session enters it (``async with``: a server to spawn, clients to open), calls ``prepare()``
before the first task (clients made now are not paid for by a measured task), runs tasks, and
leaves it (``aclose``). Before anything runs the session calls ``check(suite)``: a suite the
target cannot run is refused then, naming the case. Before the first task, ``preflight()``: an
HTTP target that cannot be reached fails the run then, clearly, rather than every task. A
conformance suite checks every built-in target against it (``tests/conformance``).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType
from typing import Self

from perfbench.sample import Sample
from perfbench.suite import Suite
from perfbench.task import Task


class Target:
    # Prices the task's tokens: a hosted model's name, or the model a simulated one borrows
    # its prices from. None: unpriced.
    price_ref: str | None = None
    simulated: bool = False  # the target is perfbench's own mock: its costs are illustrative
    # A server this target started that worker processes use instead of starting their own.
    server_url: str | None = None
    # The credentials it sends (keys, header values): masked in every sample's text (the
    # runner's one redaction pass, http/redact.py), whatever part of a reply echoed them.
    secrets: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """A short, key-free description stored in the run (``mock:default``)."""
        raise NotImplementedError

    async def run(self, task: Task) -> Sample:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def check(self, suite: Suite) -> None:
        """Refuse, before anything runs, a suite this target cannot run (raise a TargetError
        naming the case): a case with tools against an API without tool calling, say."""

    async def preflight(self) -> None:
        """Check, before the first task, that the target can be reached at all; raise a
        TargetError saying what to check when it cannot. In-process targets: nothing to do."""

    def prepare(self) -> None:
        """Make what the first task would otherwise make (HTTP clients), in the event loop."""

    async def aclose(self) -> None:
        """Release what the target holds (clients, a server it started)."""


async def open_target(target: Target, stack: AsyncExitStack) -> None:
    """Enter a target for a run; ``stack`` leaves it when the run ends."""
    await stack.enter_async_context(target)
    target.prepare()
