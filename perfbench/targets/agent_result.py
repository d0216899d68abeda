"""A whole agent's answer, as the HTTP agent and Python callable targets get it: parsed into an
``AgentResult`` and recorded on the task (the request and answer formats are in
docs/agent-targets.md). Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from perfbench.errors import TargetError
from perfbench.sample import STATUSES, Sample, Status, Step
from perfbench.targets.proxied import Outcome, Via, attributed
from perfbench.task import Task

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class AgentMapping:
    """Where each field of the agent's answer is, as dotted paths (``result.text``; a number
    indexes a list: ``choices.0.message.content``). ``None`` means the agent does not report it."""

    output: str = "output"
    tool_calls: str | None = "tool_calls"
    steps: str | None = "steps"
    usage: str | None = "usage"

    def __post_init__(self) -> None:
        for field in ("output", "tool_calls", "steps", "usage"):
            path = getattr(self, field)
            if path is not None and (not isinstance(path, str) or "" in path.split(".")):
                raise TargetError(f"agent mapping '{field}': '{path}' is not a dotted path")


@dataclass(frozen=True, slots=True)
class ReportedStep:
    """A step the agent timed itself; perfbench only places it on the task's timeline."""

    kind: str  # "model" or "tool"
    name: str
    duration: float
    ttft: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    status: Status = "ok"


@dataclass(frozen=True, slots=True)
class AgentResult:
    output: str
    tool_calls: tuple[str, ...] = ()
    steps: tuple[ReportedStep, ...] = ()
    tokens_in: int | None = None
    tokens_out: int | None = None


class MalformedResult(ValueError):
    """The agent's answer lacks its output or has a field of the wrong shape."""


def parse_agent_result(doc: object, mapping: AgentMapping | None = None) -> AgentResult:
    """An agent's answer (parsed JSON, or any object with those attributes) as an AgentResult;
    raise ``MalformedResult`` naming the offending field."""
    mapping = mapping or AgentMapping()
    output = lookup(doc, mapping.output)
    if output is _MISSING or output is None:
        raise MalformedResult(f"no output: field '{mapping.output}' is missing")
    if not isinstance(output, str):
        raise MalformedResult(f"'{mapping.output}': expected a string, got {_type(output)}")
    steps = _steps(_optional(doc, mapping.steps), mapping.steps or "")
    tools = _optional(doc, mapping.tool_calls)
    if tools is None:  # not reported: the tool steps, if any, say which tools ran
        names = tuple(s.name for s in steps if s.kind == "tool")
    else:
        names = _tool_names(tools, mapping.tool_calls or "")
    tokens_in, tokens_out = _usage(_optional(doc, mapping.usage), mapping.usage or "")
    return AgentResult(output, names, steps, tokens_in, tokens_out)


def lookup(doc: object, path: str) -> Any:
    """The value at a dotted path through mappings, lists (numeric segments) and object
    attributes; ``_MISSING`` when any segment is absent."""
    node: Any = doc
    for key in path.split("."):
        if isinstance(node, Mapping):
            node = node.get(key, _MISSING)
        elif isinstance(node, list | tuple):
            node = node[int(key)] if key.isdigit() and int(key) < len(node) else _MISSING
        elif node is None or isinstance(node, str | bytes | int | float):
            return _MISSING  # never attributes of plain values (`"text".upper`)
        else:
            node = getattr(node, key, _MISSING)
        if node is _MISSING:
            return _MISSING
    return node


def _optional(doc: object, path: str | None) -> Any:
    value = _MISSING if path is None else lookup(doc, path)
    return None if value is _MISSING else value


def _tool_names(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise MalformedResult(f"'{path}': expected a list, got {_type(value)}")
    names = []
    for i, item in enumerate(value):
        name = item if isinstance(item, str) else lookup(item, "name")
        if not isinstance(name, str):
            raise MalformedResult(f"'{path}[{i}]': expected a name or an object with a name")
        names.append(name)
    return tuple(names)


def _steps(value: object, path: str) -> tuple[ReportedStep, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise MalformedResult(f"'{path}': expected a list, got {_type(value)}")
    return tuple(_step(item, f"{path}[{i}]") for i, item in enumerate(value))


def _step(item: object, where: str) -> ReportedStep:
    kind = lookup(item, "kind")
    if kind not in ("model", "tool"):
        raise MalformedResult(f"'{where}.kind': expected 'model' or 'tool'")
    name = _optional(item, "name")
    if name is not None and not isinstance(name, str):
        raise MalformedResult(f"'{where}.name': expected a string, got {_type(name)}")
    status = _optional(item, "status") or "ok"
    if status not in STATUSES:
        raise MalformedResult(f"'{where}.status': expected one of {', '.join(STATUSES)}")
    duration = _seconds(lookup(item, "duration_s"), f"{where}.duration_s")
    if duration is None:
        raise MalformedResult(f"'{where}.duration_s': missing")
    return ReportedStep(
        kind=kind,
        name=name or kind,
        duration=duration,
        ttft=_seconds(_optional(item, "ttft_s"), f"{where}.ttft_s"),
        tokens_in=_count(_optional(item, "tokens_in"), f"{where}.tokens_in"),
        tokens_out=_count(_optional(item, "tokens_out"), f"{where}.tokens_out"),
        status=status,
    )


def _usage(value: object, path: str) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if isinstance(value, list | tuple | str | int | float):
        raise MalformedResult(f"'{path}': expected an object, got {_type(value)}")
    # Anthropic-style names first, then OpenAI-style ones.
    tokens_in = _first(value, "input_tokens", "prompt_tokens")
    tokens_out = _first(value, "output_tokens", "completion_tokens")
    return _count(tokens_in, f"{path}.input_tokens"), _count(tokens_out, f"{path}.output_tokens")


def _first(doc: object, *keys: str) -> Any:
    for key in keys:
        value = _optional(doc, key)
        if value is not None:
            return value
    return None


def _count(value: object, where: str) -> int | None:
    # bool is an int in Python; `true` tokens is a mistake, not 1.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedResult(f"'{where}': expected a whole number ≥ 0, got {value!r:.40}")
    return value


def _seconds(value: object, where: str) -> float | None:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise MalformedResult(f"'{where}': expected seconds ≥ 0, got {value!r:.40}")
    if math.isinf(value):
        raise MalformedResult(f"'{where}': expected a finite number of seconds")
    return float(value)


def _type(value: object) -> str:
    return "null" if value is None else type(value).__name__


_NO_CALL = (
    "the agent answered without a model call through the proxy: does it send its calls to the "
    "route it was given (a python: function's `proxy` argument, an HTTP agent's request field "
    "`proxy`: openai_base_url, anthropic_base_url, api_key)?"
)


def record_result(
    task: Task, envelope: Step, result: AgentResult, end: float, via: Via | None = None
) -> Sample:
    """The ok sample of a task whose agent answered: usage on the ``agent`` step, the agent's own
    steps placed one after another from the request's start, and the sample's counts fixed.
    Through the proxy (``via``) the steps are the calls it saw and the agent's own time."""
    if via is not None:
        outcome = Outcome(answer=result.output, tool_calls=result.tool_calls or None)
        return attributed(task, via, end, outcome, _NO_CALL)
    envelope.tokens_in, envelope.tokens_out = result.tokens_in, result.tokens_out
    offset = envelope.start
    for reported in result.steps:
        task.steps.append(_placed(reported, offset))
        offset += reported.duration
    expect_ok = task.case.expect.check(result.tool_calls, result.output)
    sample = task.sample("ok", expect_ok=expect_ok, end=end)
    _count_agent_calls(sample, result)
    return sample


def _placed(reported: ReportedStep, start: float) -> Step:
    return Step(
        kind="model" if reported.kind == "model" else "tool",
        name=reported.name,
        start=start,
        duration=reported.duration,
        ttft=reported.ttft,
        tokens_in=reported.tokens_in,
        tokens_out=reported.tokens_out,
        status=reported.status,
    )


def _count_agent_calls(sample: Sample, result: AgentResult) -> None:
    # Task.sample() sums every model step, but the `agent` step *encloses* the reported ones:
    # summing both would count tokens and model calls twice. Usage is the agent's total.
    if not result.steps:
        sample.tool_calls = len(result.tool_calls)
        return
    models = [s for s in result.steps if s.kind == "model"]
    sample.model_calls = len(models)
    sample.tool_calls = len(result.steps) - len(models)
    if result.tokens_in is None and result.tokens_out is None:
        sample.tokens_in = _sum(s.tokens_in for s in models)
        sample.tokens_out = _sum(s.tokens_out for s in models)
    else:
        sample.tokens_in, sample.tokens_out = result.tokens_in, result.tokens_out


def _sum(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def record_failure(
    task: Task,
    envelope: Step,
    status: Status,
    kind: str,
    error: str,
    end: float,
    via: Via | None = None,
) -> Sample:
    if via is not None:
        outcome = Outcome(failure=(status, kind, error))
        return attributed(task, via, end, outcome, _NO_CALL)
    envelope.status = status
    return task.sample(status, error_kind=kind, error=error, end=end)
