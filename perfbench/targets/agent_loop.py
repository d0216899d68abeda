"""The built-in agent loop for model targets: send the case, run the tools the model asks for
(with the case's canned results and latencies), send the results back, until a final answer or
``max_steps``. Every model call and tool call is a step; every failure is a classified sample.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import anyio
import httpx
import orjson

from perfbench.apis.chat import (
    ChatApi,
    Messages,
    ModelReply,
    Refusal,
    ToolCall,
    check_suite,
)
from perfbench.apis.retry import RetryPolicy, server_wait, window_spent
from perfbench.apis.usage import estimate_tokens, output_text, record_details, reported_cost
from perfbench.clock import sleep_until
from perfbench.http import CallFailed, HttpClient
from perfbench.http.limits import ERROR_READ
from perfbench.http.redact import Redactor
from perfbench.sample import Sample, status_of
from perfbench.stats import tokens
from perfbench.suite import Suite
from perfbench.targets import Target
from perfbench.task import ModelCall, Task

_MS = 1e-3


class ModelAgent(Target):
    def __init__(
        self,
        api: ChatApi,
        base_url: str,
        *,
        name: str,
        key: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        concurrency: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
        seed_headers: bool = False,
        check_tokens: bool = False,
        estimates: bool = True,
        tool_latency_scale: float = 1.0,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.api, self.base_url, self._name = api, base_url.rstrip("/"), name
        self.stream = stream
        self.retry = retry or RetryPolicy()
        self.seed_headers = seed_headers  # name each call for the mock's seeded draws
        # Tokenizing every reply costs client CPU in the request loop (about 1 ms per 1,000
        # tokens): only when asked (--check-tokens).
        self.check_tokens = check_tokens
        # Whether a reply may come without usage (a server we did not write), so the offline
        # tokenizer may be needed: it is loaded before the first task (prepare) when so.
        self.estimates = estimates
        # The canned tools' latency is the client's to simulate: a mock profile's scale applies
        # whichever transport the model goes over.
        self.tool_latency_scale = tool_latency_scale
        # The key lives only in these headers: never in the name, the samples or errors
        # (error bodies that echo it back are redacted).
        extra = extra_headers or {}
        self._headers = {"content-type": "application/json", **extra, **api.headers(key)}
        self._redact = Redactor.of_request(base_url, {**extra, "key": key} if key else extra)
        self.secrets = self._redact.secrets
        self.price_ref: str | None = name  # "provider/model" prices the calls
        self.simulated = False
        self._http = HttpClient(concurrency, transport=transport)

    @property
    def name(self) -> str:
        return self._name

    def check(self, suite: Suite) -> None:
        check_suite(self.api, suite)

    def prepare(self) -> None:
        """Make the HTTP clients, and load the tokenizer the replies may need, before the
        first task (``open_target`` calls it)."""
        self._http.prepare()
        if self.estimates or self.check_tokens:
            tokens.prepare(tokens.encoding_for(self.api.model))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def preflight(self) -> None:
        await self._http.preflight(self.base_url)

    async def run(self, task: Task) -> Sample:
        case = task.case
        turns: list[str | None] = list(case.turns) if case.turns else [None]
        first = case if case.turns is None else case.model_copy(update={"input": turns[0]})
        messages = self.api.opening(first)
        called: list[str] = []
        reply = ModelReply()
        calls = 0  # model calls so far, over every turn: each one's request key is its own
        for number, text in enumerate(turns):
            if number:  # the model's real answer, then the next user turn
                messages += [{"role": "assistant", "content": reply.text},
                             {"role": "user", "content": text}]  # fmt: skip
            if case.turns is not None:
                task.turn = number
            for _ in range(case.max_steps):  # a turn ends with an answer without tool calls
                try:
                    reply = await self._call(task, messages, calls)
                except CallFailed as err:
                    return task.sample(status_of(err.kind), error_kind=err.kind, error=err.message)
                calls += 1
                if not reply.tool_calls:
                    break
                results = await self._run_tools(task, reply.tool_calls)
                called += [call.name for call in reply.tool_calls]
                self.api.extend(messages, reply, results)
            else:
                return task.sample(
                    "error",
                    error_kind="max_steps",
                    error=f"no final answer after max_steps={case.max_steps}"
                    + (f" in turn {number + 1}" if case.turns else ""),
                    expect_ok=case.expect.check(called, None),
                )
        last = task.steps[-1]  # the task ended when its (last turn's) final answer arrived
        end = last.start + last.duration
        return task.sample("ok", expect_ok=case.expect.check(called, reply.text), end=end)

    async def _run_tools(self, task: Task, calls: list[ToolCall]) -> list[tuple[ToolCall, str]]:
        """The tools one model turn asked for: at once (each its own step, overlapping in
        time), or one after the other when the case says ``parallel_tools: false``."""
        if len(calls) == 1 or not task.case.parallel_tools:
            return [(call, await self._run_tool(task, call)) for call in calls]
        results: list[str] = [""] * len(calls)

        async def one(i: int, call: ToolCall) -> None:
            results[i] = await self._run_tool(task, call)

        async with anyio.create_task_group() as tg:
            for i, call in enumerate(calls):
                tg.start_soon(one, i, call)
        return list(zip(calls, results, strict=True))

    async def _run_tool(self, task: Task, call: ToolCall) -> str:
        tool = next((t for t in task.case.tools if t.name == call.name), None)
        with task.tool_call(call.name) as step:
            if tool is None:  # the model invented a tool: tell it, as a real runtime would
                step.status = "error"
                return f"error: there is no tool named {call.name!r}"
            delay = tool.latency_ms * self.tool_latency_scale * _MS
            await sleep_until(task.clock, task.clock() + delay)
        return tool.result_text()

    async def _call(self, task: Task, messages: Messages, step: int) -> ModelReply:
        path, body = self.api.request(task.case, messages, self.stream)
        content = orjson.dumps(body)
        headers = self._call_headers(task, step)
        call = task.model_call(self.api.name)
        try:
            reply = await self._attempts(task, call, self.base_url + path, content, headers)
        except CallFailed:
            call.finish(tokens_in=None, tokens_out=None, status="error")
            raise
        # The call ends when its reply has arrived: tokenizing below is not the model's time.
        call.finish(tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)
        record_details(task, call.step, reply, self.api.model)
        if reply.tokens_out is None:  # no usage from the API: estimate, and say so
            estimate_tokens(task, reply, body)
            call.set_tokens(reply.tokens_in, reply.tokens_out)
        elif self.check_tokens:  # usage given: count it offline too, to show any discrepancy
            encoding = tokens.encoding_for(str(body.get("model", "")))
            estimate = tokens.count(output_text(reply), encoding)
            task.tokens_out_estimate = (task.tokens_out_estimate or 0) + estimate
            call.step.tokens_estimate = estimate
            task.tokenizer = task.tokenizer or encoding
        return reply

    async def _attempts(
        self, task: Task, call: ModelCall, url: str, content: bytes, headers: dict[str, str]
    ) -> ModelReply:
        rng: random.Random | None = None
        attempt = 0
        while True:
            got = await self._send(task, call, url, content, headers)
            if isinstance(got, ModelReply):
                return got
            asked = server_wait(got.headers, datetime.now(UTC))
            if got.status == 429:
                task.refused(asked, window_spent(got.headers))
            elif asked is not None:
                task.retry_after = asked
            rng = rng or task.rng("retry")
            delay, why = self._retry_delay(task, got, attempt, asked, rng)
            if delay is None:
                kind = "rate_limited" if got.status == 429 else f"http_{got.status}"
                raise CallFailed(kind, got.message(self._redact) + why, status=got.status)
            task.retries += 1
            attempt += 1
            await anyio.sleep(delay)
            call.attempt()

    def _retry_delay(
        self, task: Task, got: Refusal, attempt: int, asked: float | None, rng: random.Random
    ) -> tuple[float | None, str]:
        """How long to wait before retrying, or None (and why) when no retry follows: none
        left, a status not worth one, or a wait longer than --max-retry-wait or than the
        task has left (a retry that could not finish in time is never sent)."""
        if not self.retry.should_retry(got.status, attempt, got.headers):
            return None, ""
        delay = self.retry.delay(attempt, asked, rng)
        if delay is None:
            limit = self.retry.max_wait_s
            return None, f" (the server asked to wait {asked:g} s; --max-retry-wait is {limit:g} s)"
        left = task.time_left()
        if delay >= left:
            what = f"asked to wait {asked:g} s" if asked is not None else f"backoff {delay:.3g} s"
            return None, f" (the server {what}; {max(0.0, left):.1f} s of timeout_s were left)"
        return delay, ""

    async def _send(
        self, task: Task, call: ModelCall, url: str, content: bytes, headers: dict[str, str]
    ) -> ModelReply | Refusal:
        """One HTTP attempt: the reply, or what refused it."""

        post = self._http.post(url, content, headers, task.case.timeout_s, call.sent)
        try:
            async with post as response:  # transport failures arrive as CallFaileds
                call.headers(response.status_code, getattr(response, "headers_at", None))
                task.http_status = response.status_code
                if response.status_code >= 400:
                    text = (await response.ahead(ERROR_READ)).decode(errors="replace")
                    return Refusal(response.status_code, response.headers, text)
                reply = await self.api.receive(response, call, self.stream)
                call.arrived(getattr(response, "arrived", None))  # the last bytes' arrival
                reported = reported_cost(response.headers)
                if reported is not None:
                    task.cost_reported = (task.cost_reported or 0.0) + reported
                return reply
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            # A reply missing what the API promises, or with the wrong JSON types in it.
            raise CallFailed("malformed_stream", f"unexpected reply shape: {exc!r}") from exc

    def _call_headers(self, task: Task, step: int) -> dict[str, str]:
        if not self.seed_headers:
            return self._headers
        key = f"{task.seed}|{task.case.id}|{task.phase}|{task.run}|{task.iteration}|{step}"
        return {**self._headers, "x-perfbench-key": key, "x-perfbench-case": task.case.id}
