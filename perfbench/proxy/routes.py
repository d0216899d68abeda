"""Per-task routes: a token names the task a model call records into.

A token is 128 random bits, made when the task starts and closed when it ends: a request
carrying a token that is not open (another run's, a finished task's, a guess) is refused, so
one task's calls never land on another's, however many run at once."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from perfbench.sample import Step
from perfbench.task import ModelCall, Task


@dataclass
class Route:
    """What the proxy learnt of one task's calls, beyond the steps it put on the task."""

    token: str
    task: Task
    tool_calls: list[str] = field(default_factory=list)  # names the model asked to call
    failures: list[tuple[str, str]] = field(default_factory=list)  # (kind, message) per call
    model_calls: int = 0  # model calls begun: the next one's number, from 0
    calls: set[ModelCall] = field(default_factory=set)  # model calls in flight
    closed: bool = False  # the task's sample is being made: no call may change it now
    # Told of each model call as it ends, with the model its request asked for
    # (``perfbench proxy``: counts it, and keeps no steps, so a session of a million calls
    # holds none of them).
    on_call: Callable[[Step, str], None] | None = None
    _idle: list[anyio.Event] = field(default_factory=list)  # waiting for no call in flight

    def ended(self, call: ModelCall) -> None:
        """A call is no longer in flight."""
        self.calls.discard(call)
        if not self.calls:
            for event in self._idle:
                event.set()
            self._idle.clear()

    async def idle(self) -> None:
        """Until no call of the route is in flight."""
        if self.calls:
            event = anyio.Event()
            self._idle.append(event)
            await event.wait()


class Routes:
    def __init__(self) -> None:
        self._open: dict[str, Route] = {}

    def open(self, task: Task) -> Route:
        route = Route(secrets.token_hex(16), task)
        self._open[route.token] = route
        return route

    def get(self, token: str) -> Route | None:
        return self._open.get(token)

    def close(self, route: Route) -> None:
        """Later requests on the token are refused (an agent's straggling call after its
        task ended belongs to no task), and a call still in flight (its agent exited without
        waiting for it) ends now, cancelled, so the task's steps no longer change."""
        self._open.pop(route.token, None)
        if not route.closed:
            route.closed = True
            for call in list(route.calls):
                call.finish(tokens_in=None, tokens_out=None, status="cancelled")
                route.ended(call)
