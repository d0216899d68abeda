"""The Python callable target: a user's async agent function, called in-process once per task.

``python:package.module:function`` names ``async def function(case: perfbench.suite.Case)``. It
returns the answer as a string, or a mapping or object with ``output`` and optionally
``tool_calls``, ``steps`` and ``usage`` (the HTTP agent's answer shapes, parsed by the same code).
The await is timed as one step named ``agent``, like an HTTP agent's exchange.

The function runs in perfbench's own event loop: anything blocking in it stalls every other task
and shows up as their latency too."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from perfbench.errors import TargetError
from perfbench.sample import Sample
from perfbench.suite import Case
from perfbench.targets import Target
from perfbench.targets.agent_result import (
    MalformedResult,
    parse_agent_result,
    record_failure,
    record_result,
)
from perfbench.targets.proxied import Via
from perfbench.task import Task

AgentFunction = Callable[..., Awaitable[Any]]  # fn(case), or fn(case, proxy=…)
_PREFIX = "python:"
_MESSAGE_MAX = 500


class PythonCallable(Target):
    """Awaits ``fn(case)`` per task. ``fn`` defaults to the function ``spec`` names."""

    def __init__(
        self, spec: str, *, fn: AgentFunction | None = None, proxied: bool = False
    ) -> None:
        """``proxied`` (``--proxy``): each call is ``fn(case, proxy=ModelAccess)``, the task's
        route of perfbench's proxy (targets/proxied.py)."""
        self.spec = spec.removeprefix(_PREFIX)
        self._fn = fn if fn is not None else load_callable(self.spec)
        self._name = _PREFIX + self.spec
        if proxied:
            _check_takes_proxy(self.spec, self._fn)

    @property
    def name(self) -> str:
        return self._name

    async def run(self, task: Task) -> Sample:
        return await self.run_via(task, None)

    async def run_via(self, task: Task, via: Via | None) -> Sample:
        call = task.model_call("agent")
        envelope = task.steps[-1]
        if via is not None:  # the exchange is the agent's time, its model calls the proxy's
            envelope.kind = "agent"
        try:
            answer = await self._call(task.case, via)
        except _NotAwaitable as exc:
            end = task.now()
            call.finish(tokens_in=None, tokens_out=None, status="error")
            return record_failure(task, envelope, "error", "agent_not_async", str(exc), end, via)
        except Exception as exc:  # the agent's failure is data; cancellation is not caught
            end = task.now()
            call.finish(tokens_in=None, tokens_out=None, status="error")
            if via is not None:  # the fault it failed of may be in a call still being read
                await via.calls_done()
            kind = f"agent_exception:{type(exc).__name__}"
            message = (str(exc) or type(exc).__name__)[:_MESSAGE_MAX]
            return record_failure(task, envelope, "error", kind, message, end, via)
        except BaseException:  # cancelled or timed out by the runner: keep the time spent
            call.finish(tokens_in=None, tokens_out=None, status="cancelled")
            raise
        end = task.now()
        call.finish(tokens_in=None, tokens_out=None)
        try:
            result = parse_agent_result(
                answer if not isinstance(answer, str) else {"output": answer}
            )
        except MalformedResult as exc:
            text = str(exc)[:_MESSAGE_MAX]
            return record_failure(task, envelope, "error", "malformed_response", text, end, via)
        return record_result(task, envelope, result, end, via)

    async def _call(self, case: Case, via: Via | None) -> Any:
        # With a route, _check_takes_proxy saw the function take a `proxy` keyword.
        pending = self._fn(case) if via is None else self._fn(case, proxy=via.access)
        # load_callable() checked the function, but a wrapper can still return a plain value.
        if not inspect.isawaitable(pending):
            raise _NotAwaitable(
                f"python:{self.spec} returned {type(pending).__name__}, not an awaitable"
            )
        return await pending


class _NotAwaitable(Exception):
    pass


def load_callable(spec: str) -> AgentFunction:
    """The async function named by ``[python:]package.module:function`` (the function part may
    be dotted: ``module:Agent.run`` on a class or object). Raise ``TargetError`` saying what
    is wrong: bad spec, module not importable, attribute missing, not an async callable."""
    spec = spec.removeprefix(_PREFIX)
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise TargetError(f"python target '{spec}': expected 'package.module:function'")
    module = _import(module_name)
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise TargetError(f"python target '{spec}': '{module_name}' has no attribute '{attr}'")
        fn = getattr(fn, part)
    _check_async(spec, fn)
    return fn  # type: ignore[no-any-return]


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only a missing module *we* asked for is "not found"; one the module itself imports
        # is a broken dependency of the user's code and is reported as such.
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise TargetError(f"module '{module_name}' not found{_path_hint()}") from exc
        raise TargetError(f"importing '{module_name}' failed: {exc}") from exc
    except Exception as exc:  # the module's own top-level code failed
        detail = f"{type(exc).__name__}: {exc}"[:_MESSAGE_MAX]
        raise TargetError(f"importing '{module_name}' failed: {detail}") from exc


def _path_hint() -> str:
    # The `perfbench` console script does not put the working directory on sys.path.
    cwd = os.getcwd()
    if any(os.path.abspath(p or ".") == cwd for p in sys.path):
        return ""
    return " (the current directory is not on the import path; set PYTHONPATH=. to import from it)"


def _check_async(spec: str, fn: Any) -> None:
    if not callable(fn) or inspect.isclass(fn):
        raise TargetError(f"python target '{spec}' is a {type(fn).__name__}, not an async function")
    if not _is_async(fn):
        raise TargetError(
            f"python target '{spec}' is not async: perfbench awaits fn(case), so define it "
            "with 'async def'"
        )


def _check_takes_proxy(spec: str, fn: Any) -> None:
    """With --proxy the function is called ``fn(case, proxy=...)``: one that cannot take it
    is refused now, not as a TypeError in every task."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin): taken at its word
        return
    named = parameters.get("proxy")
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()) or (
        named is not None and named.kind in (named.POSITIONAL_OR_KEYWORD, named.KEYWORD_ONLY)
    ):
        return
    raise TargetError(
        f"python target '{spec}' with --proxy: perfbench calls fn(case, proxy=access), the "
        "task's route of its proxy; add a `proxy` parameter and send the model calls there "
        "(access.openai_base_url, access.anthropic_base_url, access.api_key; "
        "docs/agent-targets.md)"
    )


def _is_async(fn: Any) -> bool:
    # unwrap(): a functools.wraps wrapper around an async function is taken at its word, and a
    # wrapper that lies is caught per task (agent_not_async).
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn)):
        return True
    # An object with `async def __call__` (an agent instance).
    call = type(fn).__call__  # callable() was checked first
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)
