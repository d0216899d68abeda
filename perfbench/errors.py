"""perfbench's own failures. Failures of the system under test are *data* (a Sample's status);
these exceptions are for problems with perfbench's input, configuration or environment.

The tree::

    PerfbenchError                  anything perfbench itself cannot go on from (exit code 3)
    ├── CaseError                   a case suite is malformed: file, line, field, what was expected
    │   └── SuiteError              a suite as a whole is wrong (no files, empty, duplicate ids)
    ├── ProfileError                a mock profile is malformed
    ├── TargetError                 a target string cannot be resolved or configured
    ├── StoreError                  a run directory cannot be written or read
    ├── WorkerError                 a worker process (--workers) failed to start or died
    ├── AbError                     `perfbench ab` cannot go on: not a git repository, an unknown
    │                               ref, a side's run failed
    └── GateError                   a comparison cannot be made (different suites), or a rule,
                                    threshold or setting of the gate is malformed
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class PerfbenchError(Exception):
    """Base class: the CLI prints the message and exits with the config/harness exit code."""


@dataclass(frozen=True)
class Problem:
    """One mistake in one input file, located as precisely as YAML allows."""

    file: Path
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class CaseError(PerfbenchError):
    """One or more problems in case files; ``problems`` holds each, ``str()`` lists them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class SuiteError(CaseError):
    """A problem with the suite as a whole (no case files, no cases, duplicate ids)."""


class ProfileError(PerfbenchError):
    """A mock profile cannot be found or is malformed."""


class WorkerError(PerfbenchError):
    """A worker process could not start, or died during the run (its stderr is quoted)."""


class AbError(PerfbenchError):
    """A/B setup failed: not a git repository, an unknown ref, a side's run failed."""


class TargetError(PerfbenchError):
    """A target string cannot be resolved, or the target cannot be configured."""


class StoreError(PerfbenchError):
    """A run directory cannot be created, written or read."""


class GateError(PerfbenchError):
    """A comparison that cannot be made, or a gate rule, threshold or setting that is wrong."""


def reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(reason(e) for e in exc.exceptions))
    return str(exc) or type(exc).__name__
