"""The in-process mock agent: simulates a whole agent task with no sockets.

Per step it makes a simulated model call (TTFT, then one token at a time at the profile's
inter-token latency, scheduled against absolute deadlines) and then the next tool the case
expects, taking the tool's canned latency. Every draw comes from the task's own seeded
generator, so results do not depend on concurrency or scheduling order."""

from __future__ import annotations

import random

from perfbench.clock import sleep_until
from perfbench.mock.profile import Profile
from perfbench.sample import Sample
from perfbench.suite import Case
from perfbench.task import Task

_MS = 1e-3
_UNUSED = random.Random(0)  # passed where every distribution is fixed and draws nothing


class MockAgent:
    def __init__(self, profile: Profile, *, profile_name: str = "default") -> None:
        self.profile = profile
        self._name = f"mock:{profile_name}"
        # Seeding a generator costs ~10 µs; a profile with only fixed values needs none.
        self._stochastic = profile.stochastic
        self._prompt_cache: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self._name

    async def run(self, task: Task) -> Sample:
        case, profile = task.case, self.profile
        rng = task.rng("mock") if self._stochastic else _UNUSED
        plan = _plan(case)
        context = self._prompt_tokens(case)
        called: list[str] = []
        for _ in range(case.max_steps):
            final = len(called) == len(plan)
            if final:
                tokens = profile.tokens(round(profile.output_chars.draw(rng)), case.language)
            else:
                tokens = profile.tool_call_tokens
            await self._model_call(task, rng, tokens, context, content=final)
            context += tokens
            if final:
                return task.sample("ok", expect_ok=_matches(case, called))
            tool = next(t for t in case.tools if t.name == plan[len(called)])
            with task.tool_call(tool.name):
                delay = tool.latency_ms * profile.tool_latency_scale * _MS
                await sleep_until(task.clock, task.clock() + delay)
            called.append(tool.name)
            context += profile.tokens(len(tool.result_text()), case.language)
        return task.sample(
            "error",
            error_kind="max_steps",
            error=f"no final answer after max_steps={case.max_steps}",
            expect_ok=_matches(case, called),
        )

    def _prompt_tokens(self, case: Case) -> int:
        tokens = self._prompt_cache.get(case.id)
        if tokens is None:
            text = (case.system or "") + case.prompt_text()
            tokens = self._prompt_cache[case.id] = self.profile.tokens(len(text), case.language)
        return tokens

    async def _model_call(
        self, task: Task, rng: random.Random, tokens: int, context: int, *, content: bool
    ) -> None:
        call = task.model_call("mock")
        deadline = task.clock() + self.profile.ttft_ms.draw(rng) * _MS
        for i in range(tokens):
            if i:
                deadline += self.profile.itl_ms.draw(rng) * _MS
            await sleep_until(task.clock, deadline)
            call.token(content=content)
        call.finish(tokens_in=context, tokens_out=tokens)


def _plan(case: Case) -> list[str]:
    """The tools the simulated model calls, in order: what the case expects, else all declared."""
    return list(case.expect.tool_calls) or [t.name for t in case.tools]


def _matches(case: Case, called: list[str]) -> bool | None:
    if not case.expect.tool_calls:
        return None
    return called == case.expect.tool_calls
