"""perfbench: measure the latency, throughput, tokens and cost of LLM agents and LLM APIs.

The package reads as the data flow::

    suite (cases in) ─▶ spec (what a run is) ─▶ api ─▶ engine (session, runner, fleet, sweep)
                                                          │ a Task per case execution
                                                          ▼
                                targets (+ apis, the wire formats, and http beneath) ─▶ Sample
                                                          ▼
                                  store (recorder, run directories) ─▶ stats (pure numbers)
                                                          ▼
                                       report (tables, Markdown, charts) ◀─ cli (the face)

Layers only look down: stats never imports the engine, targets or CLI; report reads stored
runs, never the engine; targets never import the engine; the mock never imports targets (the
import-linter contracts in pyproject.toml hold the package to that, in ``make lint``).
docs/architecture.md has the map.

The public names below are imported on first use, so ``import perfbench`` stays cheap for the
CLI and worker processes.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Even __version__ (importlib.metadata) is read on first use: the console script's entry must
# run before any import that a Ctrl-C could interrupt with a traceback (cli/__init__.py).
_EXPORTS = {
    "__version__": "perfbench.version",
    "api": "perfbench.api",
    "Plan": "perfbench.spec",
    "RunSpec": "perfbench.spec",
    "SweepPlan": "perfbench.spec",
    "SweepSpec": "perfbench.spec",
    "TargetSpec": "perfbench.spec",
    "RunObserver": "perfbench.engine.observer",
    "RunResult": "perfbench.engine.results",
    "Session": "perfbench.engine.session",
    "Sweep": "perfbench.engine.sweep",
    "SweepResult": "perfbench.engine.results",
    "Case": "perfbench.suite",
    "Suite": "perfbench.suite",
    "load_suite": "perfbench.suite",
    "Target": "perfbench.targets",
    "ModelAccess": "perfbench.targets.proxied",
    "Task": "perfbench.task",
    "Sample": "perfbench.sample",
    "Step": "perfbench.sample",
    "load_run": "perfbench.export",
    "PerfbenchError": "perfbench.errors",
}

__all__ = [
    "Case",
    "ModelAccess",
    "PerfbenchError",
    "Plan",
    "RunObserver",
    "RunResult",
    "RunSpec",
    "Sample",
    "Session",
    "Step",
    "Suite",
    "Sweep",
    "SweepPlan",
    "SweepResult",
    "SweepSpec",
    "Target",
    "TargetSpec",
    "Task",
    "__version__",
    "api",
    "load_run",
    "load_suite",
]

if TYPE_CHECKING:
    from perfbench import api
    from perfbench.engine.observer import RunObserver
    from perfbench.engine.results import RunResult, SweepResult
    from perfbench.engine.session import Session
    from perfbench.engine.sweep import Sweep
    from perfbench.errors import PerfbenchError
    from perfbench.export import load_run
    from perfbench.sample import Sample, Step
    from perfbench.spec import Plan, RunSpec, SweepPlan, SweepSpec, TargetSpec
    from perfbench.suite import Case, Suite, load_suite
    from perfbench.targets import Target
    from perfbench.targets.proxied import ModelAccess
    from perfbench.task import Task
    from perfbench.version import __version__


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perfbench' has no attribute {name!r}")
    found = import_module(module)
    value = found if name == "api" else getattr(found, name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
