"""The HTTP agent target: a user's own agent behind an HTTP endpoint, one POST per task.

perfbench POSTs the case as JSON and reads one JSON answer (the request and answer formats are in
docs/agent-targets.md). A non-streaming JSON answer shows nothing of the agent's inner timing, so
the whole exchange is recorded as one model-like step named ``agent`` with no TTFT (none is
observable; none is invented). Steps the agent reports about itself are appended after it.

The answer is parsed and recorded by ``agent_result``, as the Python callable target's is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson

from perfbench.apis.retry import server_wait, window_spent
from perfbench.http import CallFailed, HttpClient, Response
from perfbench.http.failures import mapped
from perfbench.http.httpx_backend import HttpxResponse
from perfbench.http.limits import ERROR_READ
from perfbench.http.redact import Redactor
from perfbench.http.urls import checked_url, public_url
from perfbench.sample import Sample, Step, status_of
from perfbench.suite import Case
from perfbench.targets import Target
from perfbench.targets.agent_result import (
    AgentMapping,
    MalformedResult,
    parse_agent_result,
    record_failure,
    record_result,
)
from perfbench.targets.proxied import Via
from perfbench.task import Task

__all__ = ["AgentMapping", "HttpAgent", "public_url", "request_fields"]

# Connections kept when no concurrency is given; tasks beyond it would queue for a connection
# (their wait is the step's, and a warning names it). Runs pass their planned concurrency.
POOL_SIZE = 64
_EXCERPT = 200  # characters of an error body kept in a sample


class HttpAgent(Target):
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
        self.url = checked_url(url, "agent URL")
        self.mapping = mapping or AgentMapping()
        self._name = "http+agent:" + public_url(url)
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        self._headers.update(headers or {})
        # An agent may echo the request (headers included) in an error body.
        self._redact = Redactor.of_request(url, headers or {})
        self.secrets = self._redact.secrets
        self._client = client  # the caller's httpx client, used as given
        # Otherwise the model clients' pool: perfbench's connections on asyncio (~30 µs of client
        # CPU per short call against 2.7 ms through httpx's own pool), httpx under trio and respx.
        self._http = HttpClient(concurrency, headers=None) if client is None else None
        # Without timeout_s the runner's per-case timeout is the only limit (httpx's default
        # of 5 s would cut slow agents short); a given client keeps its own setting.
        self._timeout: Any = httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s
        self._bodies: dict[int, tuple[Case, dict[str, Any]]] = {}

    @property
    def name(self) -> str:
        return self._name

    def prepare(self) -> None:
        """Make the HTTP clients before the first task (``open_target`` calls it)."""
        if self._http is not None:
            self._http.prepare()

    async def aclose(self) -> None:
        """Close the clients this target created (a client passed in belongs to the caller)."""
        if self._http is not None:
            await self._http.aclose()

    async def preflight(self) -> None:
        if self._http is not None:  # a caller's own client may be mocked (respx): no socket
            await self._http.preflight(self.url)

    async def run(self, task: Task) -> Sample:
        return await self.run_via(task, None)

    async def run_via(self, task: Task, via: Via | None) -> Sample:
        """The task, its route of perfbench's proxy (``--proxy``) in the request's ``proxy``
        field when there is one."""
        call = task.model_call("agent")
        envelope = task.steps[-1]
        if via is not None:  # the exchange is the agent's time, its model calls the proxy's
            envelope.kind = "agent"
        try:
            body, headers = await self._exchange(task, call.sent, via)
        except CallFailed as exc:  # transport failures, classified (http.failures)
            end = task.now()
            call.finish(tokens_in=None, tokens_out=None, status="error")
            if via is not None:
                await via.calls_done()
            text = self._redact(exc.message)[:500]
            return record_failure(task, envelope, status_of(exc.kind), exc.kind, text, end, via)
        except BaseException:  # cancelled or timed out by the runner: keep the time spent
            call.finish(tokens_in=None, tokens_out=None, status="cancelled")
            raise
        end = task.now()
        call.finish(tokens_in=None, tokens_out=None)
        if via is not None:  # a failed answer's cause may be in a call still being read
            await via.calls_done()
        return self._answer(task, envelope, body, headers, end, via)

    async def _exchange(
        self, task: Task, sent: Callable[[], None], via: Via | None
    ) -> tuple[bytes, Mapping[str, str]]:
        # Streamed so the status is known (and kept) even when the body breaks off.
        content = self._body(task, via)
        if self._http is not None:
            given = self._timeout is not httpx.USE_CLIENT_DEFAULT
            read_timeout = float(self._timeout) if given else task.case.timeout_s
            async with self._http.post(self.url, content, self._headers, read_timeout, sent) as r:
                return await _read(task, r), r.headers
        assert self._client is not None
        request = self._client.build_request(
            "POST", self.url, content=content, headers=self._headers, timeout=self._timeout
        )
        with mapped(self.url):
            response = await self._client.send(request, stream=True)
            try:
                return await _read(task, HttpxResponse(response)), response.headers
            finally:
                await response.aclose()

    def _answer(
        self,
        task: Task,
        envelope: Step,
        body: bytes,
        headers: Mapping[str, str],
        end: float,
        via: Via | None,
    ) -> Sample:
        status_code = task.http_status or 0
        if status_code == 429:
            task.refused(server_wait(headers, datetime.now(UTC)), window_spent(headers))
            excerpt = self._excerpt(body)
            return record_failure(task, envelope, "rate_limited", "rate_limited", excerpt, end, via)
        if not 200 <= status_code < 300:  # redirects are not followed: they would add latency
            text = f"HTTP {status_code}: {self._excerpt(body)}"
            return record_failure(task, envelope, "error", f"http_{status_code}", text, end, via)
        try:
            result = parse_agent_result(orjson.loads(body), self.mapping)
        except orjson.JSONDecodeError as exc:
            text = f"answer is not JSON ({exc}); it starts: {self._excerpt(body)}"
            return record_failure(task, envelope, "error", "malformed_response", text, end, via)
        except MalformedResult as exc:
            text = self._redact(str(exc))[:500]
            return record_failure(task, envelope, "error", "malformed_response", text, end, via)
        return record_result(task, envelope, result, end, via)

    def _body(self, task: Task, via: Via | None = None) -> bytes:
        # The case part is built once per case (model_dump costs tens of µs, per task budget).
        case = task.case
        cached = self._bodies.get(id(case))
        if cached is None or cached[0] is not case:
            cached = self._bodies[id(case)] = (case, request_fields(case))
        metadata = {"phase": task.phase, "run": task.run, "iteration": task.iteration}
        if via is not None:
            return orjson.dumps({**cached[1], "metadata": metadata, "proxy": via.access.as_json()})
        return orjson.dumps({**cached[1], "metadata": metadata})

    def _excerpt(self, body: bytes) -> str:
        text = " ".join(body[: _EXCERPT * 4].decode("utf-8", "replace").split())
        return self._redact(text)[:_EXCERPT] or "(empty body)"


async def _read(task: Task, response: Response) -> bytes:
    """The answer, bounded (http/limits.py): a refused one only as far as its excerpt needs."""
    task.http_status = status = response.status_code
    return await (response.aread() if 200 <= status < 300 else response.ahead(ERROR_READ))


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
