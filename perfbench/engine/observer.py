"""What a run tells whoever watches it: one observer class with optional hooks, as trio's
``Instrument``. Override the hooks you need; the rest cost nothing. ``sample`` is on the hot
path (once per task), so the engine calls it only when a subclass overrides it (``wants``).

A sweep calls the run hooks for every level's run, then ``level_finished``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfbench.sample import Phase, Sample

if TYPE_CHECKING:
    from perfbench.engine.results import RunResult
    from perfbench.stats.knee import Level


class Engine(Protocol):
    """What an observer may ask of the engine while a run works: the same face for the
    one-process runner and the worker fleet."""

    def tasks_in_flight(self) -> int: ...

    def limit(self) -> int | None:
        """The adaptive concurrency limit now (None: the load is not adaptive)."""
        ...


class RunObserver:
    def run_started(self, meta: Mapping[str, Any], planned: int, engine: Engine) -> None:
        """The run directory exists (``meta`` has its id); ``planned`` tasks are to run."""

    def resuming(self, note: str) -> None:
        """A resumed run measures a pass again whole (``Resume.note``): one line saying so."""

    def controls(self, stop: Callable[[str | None], None]) -> None:
        """The run's ``stop(reason)``, handed over before it starts: an observer may end the
        run (``--abort-on``) as the first Ctrl-C does; ``reason`` goes to ``stopped_by``."""

    def pass_started(self, phase: Phase, run: int, tasks: int) -> None:
        """A pass begins with ``tasks`` tasks (those a resumed run still has to do)."""

    def sample(self, sample: Sample) -> None:
        """A task finished (every status, warmup included)."""

    def stopping(self) -> None:
        """The run was asked to stop (the first Ctrl-C): tasks in flight are cancelled and
        recorded as such, and the run ends ``interrupted``."""

    def run_finished(self, result: RunResult) -> None:
        """The run ended (completed, interrupted or failed: ``result.meta["status"]``)."""

    def level_finished(self, level: Level, reason: str | None, sweep_dir: Path) -> None:
        """A sweep measured a level; ``reason`` is why it stops the doubling, or None."""

    def wants_samples(self) -> bool:
        """Whether ``sample`` should be called: by default, when a subclass overrides it. With
        worker processes, samples are decoded in the parent only for an observer that wants
        them."""
        return wants(self, "sample")


def wants(observer: RunObserver, hook: str) -> bool:
    """Whether ``observer`` overrides ``hook`` (so a hot path can skip calling it)."""
    return getattr(type(observer), hook) is not getattr(RunObserver, hook)
