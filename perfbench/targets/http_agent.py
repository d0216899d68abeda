"""The HTTP agent target: a user's own agent behind an HTTP endpoint, one POST per task.

perfbench POSTs the case as JSON and reads one JSON answer (the request and answer formats are in
docs/agent-targets.md). A non-streaming JSON answer shows nothing of the agent's inner timing, so
the whole exchange is recorded as one model-like step named ``agent`` with no TTFT (none is
observable; none is invented). Steps the agent reports about itself are appended after it.

The result parsing and sample building here are shared with the Python callable target."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from perfbench.errors import TargetError
from perfbench.http import Pool
from perfbench.sample import STATUSES, Sample, Status, Step
from perfbench.suite import Case
from perfbench.targets.chat import ModelError
from perfbench.task import Task

# Connections kept when no concurrency is given; tasks beyond it would queue for a connection
# (their wait is the step's, and a warning names it). Runs pass their planned concurrency.
POOL_SIZE = 64
_EXCERPT = 200  # characters of an error body kept in a sample
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


# --- parsing (shared with python_callable) -----------------------------------------------------


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


# --- recording (shared with python_callable) ---------------------------------------------------


def expect_ok(case: Case, result: AgentResult) -> bool | None:
    """Whether the answer meets the case's ``expect`` (None when the case expects nothing)."""
    expect = case.expect
    if not expect.tool_calls and not expect.output_contains:
        return None
    ok = not expect.tool_calls or list(result.tool_calls) == expect.tool_calls
    folded = result.output.casefold()
    return ok and all(s.casefold() in folded for s in expect.output_contains)


def record_result(task: Task, envelope: Step, result: AgentResult, end: float) -> Sample:
    """The ok sample of a task whose agent answered: usage on the ``agent`` step, the agent's own
    steps placed one after another from the request's start, and the sample's counts fixed."""
    envelope.tokens_in, envelope.tokens_out = result.tokens_in, result.tokens_out
    offset = envelope.start
    for reported in result.steps:
        task.steps.append(_placed(reported, offset))
        offset += reported.duration
    sample = task.sample("ok", expect_ok=expect_ok(task.case, result), end=end)
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
    task: Task, envelope: Step, status: Status, kind: str, error: str, end: float
) -> Sample:
    envelope.status = status
    return task.sample(status, error_kind=kind, error=error, end=end)


# --- the target ----------------------------------------------------------------------------------


class HttpAgent:
    """POSTs each task to ``url`` and times the exchange; see docs/agent-targets.md."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        mapping: AgentMapping | None = None,
        client: httpx.AsyncClient | None = None,
        timeout_s: float | None = None,
        concurrency: int = POOL_SIZE,
    ) -> None:
        self.url = _checked_url(url)
        self.mapping = mapping or AgentMapping()
        self._name = "http+agent:" + public_url(url)
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        self._headers.update(headers or {})
        self._secrets = _secrets(url, headers or {})
        self._client = client  # the caller's httpx client, used as given
        # Otherwise the model clients' pool: aiohttp on asyncio (~0.3 ms of client CPU per call
        # against 2.7 ms through httpx's own pool), httpx under trio and respx.
        self._pool = Pool(concurrency, headers=None) if client is None else None
        # Without timeout_s the runner's per-case timeout is the only limit (httpx's default
        # of 5 s would cut slow agents short); a given client keeps its own setting.
        self._timeout: Any = httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s
        self._bodies: dict[int, tuple[Case, dict[str, Any]]] = {}

    @property
    def name(self) -> str:
        return self._name

    def prepare(self) -> None:
        """Make the HTTP clients before the first task (``open_target`` calls it)."""
        if self._pool is not None:
            self._pool.prepare()

    async def aclose(self) -> None:
        """Close the clients this target created (a client passed in belongs to the caller)."""
        if self._pool is not None:
            await self._pool.aclose()

    async def run(self, task: Task) -> Sample:
        call = task.model_call("agent")
        envelope = task.steps[-1]
        try:
            body = await self._exchange(task, call.sent)
        except httpx.RequestError as exc:
            end = task.now()
            call.finish(tokens_in=None, tokens_out=None, status="error")
            status, kind = _transport_kind(exc)
            return record_failure(task, envelope, status, kind, self._transport_text(exc), end)
        except ModelError as exc:  # the pool's transport failures, classified
            end = task.now()
            call.finish(tokens_in=None, tokens_out=None, status="error")
            status = "timeout" if exc.kind == "timeout" else "error"
            text = self._redact(exc.message)[:500]
            return record_failure(task, envelope, status, exc.kind, text, end)
        except BaseException:  # cancelled or timed out by the runner: keep the time spent
            call.finish(tokens_in=None, tokens_out=None, status="cancelled")
            raise
        end = task.now()
        call.finish(tokens_in=None, tokens_out=None)
        return self._answer(task, envelope, body, end)

    async def _exchange(self, task: Task, sent: Callable[[], None]) -> bytes:
        # Streamed so the status is known (and kept) even when the body breaks off.
        content = self._body(task)
        if self._pool is not None:
            given = self._timeout is not httpx.USE_CLIENT_DEFAULT
            read_timeout = float(self._timeout) if given else task.case.timeout_s
            async with self._pool.post(self.url, content, self._headers, read_timeout, sent) as r:
                task.http_status = r.status_code
                return await r.aread()
        assert self._client is not None
        request = self._client.build_request(
            "POST", self.url, content=content, headers=self._headers, timeout=self._timeout
        )
        response = await self._client.send(request, stream=True)
        try:
            task.http_status = response.status_code
            return await response.aread()
        finally:
            await response.aclose()

    def _answer(self, task: Task, envelope: Step, body: bytes, end: float) -> Sample:
        status_code = task.http_status or 0
        if status_code == 429:
            excerpt = self._excerpt(body)
            return record_failure(task, envelope, "rate_limited", "rate_limited", excerpt, end)
        if not 200 <= status_code < 300:  # redirects are not followed: they would add latency
            text = f"HTTP {status_code}: {self._excerpt(body)}"
            return record_failure(task, envelope, "error", f"http_{status_code}", text, end)
        try:
            result = parse_agent_result(orjson.loads(body), self.mapping)
        except orjson.JSONDecodeError as exc:
            text = f"answer is not JSON ({exc}); it starts: {self._excerpt(body)}"
            return record_failure(task, envelope, "error", "malformed_response", text, end)
        except MalformedResult as exc:
            text = self._redact(str(exc))[:500]
            return record_failure(task, envelope, "error", "malformed_response", text, end)
        return record_result(task, envelope, result, end)

    def _body(self, task: Task) -> bytes:
        # The case part is built once per case (model_dump costs tens of µs, per task budget).
        case = task.case
        cached = self._bodies.get(id(case))
        if cached is None or cached[0] is not case:
            cached = self._bodies[id(case)] = (case, request_fields(case))
        metadata = {"phase": task.phase, "run": task.run, "iteration": task.iteration}
        return orjson.dumps({**cached[1], "metadata": metadata})

    def _transport_text(self, exc: httpx.RequestError) -> str:
        detail = str(exc) or "no detail"
        return self._redact(f"{type(exc).__name__}: {detail}")[:500]

    def _excerpt(self, body: bytes) -> str:
        text = " ".join(body[: _EXCERPT * 4].decode("utf-8", "replace").split())
        return self._redact(text)[:_EXCERPT] or "(empty body)"

    def _redact(self, text: str) -> str:
        # An agent may echo the request (headers included) in an error body.
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def request_fields(case: Case) -> dict[str, Any]:
    """The task JSON without its ``metadata`` (see docs/agent-targets.md)."""
    messages = None
    if case.messages is not None:
        messages = [{"role": m.role, "content": m.content} for m in case.messages]
    tools = [
        {"name": t.name, "description": t.description, "parameters": t.parameters}
        for t in case.tools
    ]
    return {
        "id": case.id,
        "input": case.input,
        "messages": messages,
        "system": case.system,
        "language": case.language,
        "tools": tools,
        "max_steps": case.max_steps,
    }


def public_url(url: str) -> str:
    """``url`` without credentials, query string or fragment: safe to store in a run."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


def _checked_url(url: str) -> str:
    # A bad URL would otherwise fail every task alike, as a transport error; say it once.
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"agent URL '{public_url(url)}': expected http://host/path or https://…")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise TargetError(f"agent URL '{public_url(url)}': {exc}") from exc
    return url


def _secrets(url: str, headers: Mapping[str, str]) -> tuple[str, ...]:
    """Strings that must never appear in an error: header values (and their long words, so
    ``sk-…`` of ``Bearer sk-…`` goes too), URL credentials and query values."""
    found: set[str] = set()
    for value in headers.values():
        found.add(value)
        found.update(word for word in value.split() if len(word) >= 8)
    parts = urlsplit(url)
    found.update(p for p in (parts.username, parts.password) if p)
    for pair in parts.query.split("&"):
        found.add(pair.partition("=")[2])
    # Longest first, so a value is replaced before a word inside it.
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))


_DROPPED = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.CloseError)


def _transport_kind(exc: httpx.RequestError) -> tuple[Status, str]:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return "error", "connect_error"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", "timeout"
    if isinstance(exc, _DROPPED):
        return "error", "connection_dropped"
    if isinstance(exc, httpx.DecodingError):  # e.g. a broken gzip body
        return "error", "malformed_response"
    return "error", "transport_error"
