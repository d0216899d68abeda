"""The in-process mock agent: a whole agent task against the simulated model, with no sockets.

Each step asks the simulator (the same one behind the mock HTTP server) for a reply, receives
its tokens at their due times (absolute deadlines, so timer jitter does not accumulate), and,
when the reply is a tool call, runs the case's tool with its canned latency and result."""

from __future__ import annotations

import anyio

from perfbench.clock import sleep_until
from perfbench.mock.limiter import Limiter
from perfbench.mock.profile import Profile, RateLimits
from perfbench.mock.simulator import Reply, Simulator, ToolSpec, Turn
from perfbench.sample import Sample
from perfbench.suite import Case
from perfbench.targets import Target
from perfbench.task import Task

_MS = 1e-3

# What an injected fault looks like to an agent that called the model in-process: the kind the
# same fault gets over HTTP (sample.ERROR_KINDS), so one profile reads the same on -t mock and
# -t mock+http (a 5xx there is retried first; here there is nothing to retry).
_FAULTS = {
    "error_500": ("http_500", "simulated HTTP 500"),
    "error_503": ("http_503", "simulated HTTP 503"),
    "reset": ("connection_dropped", "simulated connection reset mid-stream"),
    "truncate": ("malformed_stream", "simulated stream that ended early"),
    "malformed": ("malformed_stream", "simulated chunk with broken JSON"),
}


class MockAgent(Target):
    def __init__(
        self, profile: Profile, *, profile_name: str = "default", model: str | None = None
    ) -> None:
        self.profile = profile
        self.simulator = Simulator(profile)
        self._model = model or ""
        self._name = f"mock:{profile_name}" + (f"@{model}" if model else "")
        self._tools: dict[str, tuple[ToolSpec, ...]] = {}
        self._limits: Limiter | None = None
        self._has_limits = profile.rate_limits != RateLimits()
        # Costs are simulated: the simulated model borrows a real model's prices.
        self.price_ref = profile.model(model)[1].prices_as
        self.simulated = True

    def _limiter(self, task: Task) -> Limiter | None:
        """The profile's rate limits, on the run's clock (made on first use, in the loop)."""
        if self._limits is None and self._has_limits:
            self._limits = Limiter(self.profile.rate_limits, task.clock)
        return self._limits

    @property
    def name(self) -> str:
        return self._name

    async def run(self, task: Task) -> Sample:
        case = task.case
        texts = list(case.turns) if case.turns else [None]
        messages = _opening(case) if case.turns is None else [*_opening(case), texts[0] or ""]
        called: list[str] = []
        steps = 0  # over every turn: each model call's draw key is its own
        answer: str | None = None
        for number, text in enumerate(texts):
            if number:  # the model's answer is in messages already; the next user turn
                messages.append(text or "")
            if case.turns is not None:
                task.turn = number
            ended = await self._turn(task, messages, called, steps)
            if isinstance(ended, Sample):
                return ended
            steps, answer = ended
        return task.sample("ok", expect_ok=case.expect.check(called, answer))

    async def _turn(
        self, task: Task, messages: list[str], called: list[str], first: int
    ) -> Sample | tuple[int, str]:
        """One user turn: model calls and tool calls until an answer without tool calls (the
        model calls made so far, and the answer), or the failed sample."""
        case = task.case
        tools = self._specs(case)
        prefix = f"{task.seed}|{case.id}|{task.phase}|{task.run}|{task.iteration}"
        for step in range(first, first + case.max_steps):
            turn = Turn(
                model=self._model,
                messages=tuple(messages),
                tools=tools,
                tool_results=len(called),
                max_tokens=case.max_tokens,
                key=f"{prefix}|{step}",
                case=case.id,
            )
            reply = self.simulator.reply(turn)
            limiter = self._limiter(task)
            if limiter is not None:
                quota = limiter.admit(reply.prompt_tokens + reply.completion_tokens)
                if not quota.admitted:  # what a 429 would be, without the retry
                    task.refused(quota.retry_after, quota.reason in ("requests", "tokens"))
                    return task.sample(
                        "rate_limited",
                        error_kind="rate_limited",
                        error=f"simulated 429: {quota.reason} limit",
                    )
            try:
                failed = await self._receive(task, reply, len(messages))
            finally:
                if limiter is not None:
                    limiter.release()
            if failed is not None:
                return failed
            messages.append(reply.text)
            if not reply.calls:
                return step + 1, reply.text
            names = [c.name for c in reply.calls]
            unknown = next((n for n in names if not any(t.name == n for t in case.tools)), None)
            if unknown is not None:
                return task.sample(
                    "error",
                    error_kind="unknown_tool",
                    error=f"the model called '{unknown}', which the case does not declare",
                    expect_ok=False,
                )
            messages += await self._call_tools(task, case, names)
            called += names
        return task.sample(
            "error",
            error_kind="max_steps",
            error=f"no final answer after max_steps={case.max_steps}"
            + (f" in turn {task.turn + 1}" if task.turn is not None else ""),
            expect_ok=case.expect.check(called, None),
        )

    async def _receive(self, task: Task, reply: Reply, _context: int) -> Sample | None:
        """Take the reply's tokens at their due times; a fault ends the task as a failure."""
        call = task.model_call(reply.model)
        start = task.clock()
        if reply.fault == "stall":
            await sleep_until(task.clock, start + reply.stall_s)
        elif reply.fault in ("error_500", "error_503"):
            await sleep_until(task.clock, start + reply.ttft)
            call.finish(tokens_in=reply.prompt_tokens, tokens_out=None, status="error")
            kind, message = _FAULTS[reply.fault]
            return task.sample("error", error_kind=kind, error=message)
        content = not reply.calls
        broken = reply.fault in ("reset", "truncate", "malformed")
        due = reply.due()
        for i, offset in enumerate(due):
            if broken and i == len(due) // 2:
                call.finish(tokens_in=reply.prompt_tokens, tokens_out=i, status="error")
                kind, message = _FAULTS[reply.fault or ""]
                return task.sample("error", error_kind=kind, error=message)
            await sleep_until(task.clock, start + offset)
            call.token(content=content)
        call.finish(tokens_in=reply.prompt_tokens, tokens_out=reply.completion_tokens)
        call.step.finish = reply.finish
        return None

    async def _call_tools(self, task: Task, case: Case, names: list[str]) -> list[str]:
        """The turn's tools with their canned latencies: at once (each its own step), or in
        turn when the case says ``parallel_tools: false``; their results in call order."""
        if len(names) == 1 or not case.parallel_tools:
            return [await self._call_tool(task, case, name) for name in names]
        results = [""] * len(names)

        async def one(i: int, name: str) -> None:
            results[i] = await self._call_tool(task, case, name)

        async with anyio.create_task_group() as tg:
            for i, name in enumerate(names):
                tg.start_soon(one, i, name)
        return results

    async def _call_tool(self, task: Task, case: Case, name: str) -> str:
        tool = next(t for t in case.tools if t.name == name)
        with task.tool_call(name):
            delay = tool.latency_ms * self.profile.tool_latency_scale * _MS
            await sleep_until(task.clock, task.clock() + delay)
        return tool.result_text()

    def _specs(self, case: Case) -> tuple[ToolSpec, ...]:
        specs = self._tools.get(case.id)
        if specs is None:
            specs = self._tools[case.id] = tuple(ToolSpec(t.name, t.parameters) for t in case.tools)
        return specs


def _opening(case: Case) -> list[str]:
    texts = [case.system] if case.system else []
    if case.input is not None:
        return [*texts, case.input]
    return [*texts, *(m.content for m in case.messages or [])]
