"""Legacy OpenAI text completions (``POST /v1/completions``), as serving engines still offer
them (vLLM, SGLang, TGI, llama.cpp) and serving benchmarks drive them: one prompt in, text out,
streamed (``choices[0].text`` deltas, usage in a last chunk with ``stream_options``) or whole.

The API has no roles and no tools. The prompt is the case's ``input``, after its ``system``
text and a blank line when it has one; a ``messages`` case is a plain transcript, one
``Role: content`` paragraph per message and ``Assistant:`` last, for the model to go on from.
A case with tools cannot be run here: its first call is refused with a ``TargetError`` naming
the case (``--api chat`` or ``responses`` run it).

OpenAI's and vLLM's ``max_tokens`` default is 16 on this API, which would cut nearly every
answer: a case without ``max_tokens`` asks for ``DEFAULT_MAX_TOKENS``, as on Anthropic's API."""

from __future__ import annotations

from typing import Any

from perfbench.apis import sse
from perfbench.apis.chat import (
    PIECES,
    Messages,
    ModelReply,
    ToolCall,
    exact_output,
    json_object,
    openai_stream,
    text_of,
    usage_dict,
)
from perfbench.apis.openai_common import OpenAIApi, chunk_end, model_name, read_stream, read_usage
from perfbench.errors import TargetError
from perfbench.http import CallFailed, Response
from perfbench.suite import Case
from perfbench.task import ModelCall

DEFAULT_MAX_TOKENS = 1024


class OpenAICompletions(OpenAIApi):
    name = "openai-completions"

    def refuse(self, case: Case) -> None:
        """A case with tools cannot run here: said before the run, naming it (Target.check)."""
        if case.tools:
            raise TargetError(refusal(case))
        if case.turns:
            raise TargetError(
                f"case '{case.id}' has turns, and the legacy completions API (/v1/completions) "
                "has no conversation: run it with --api chat or --api responses"
            )

    def opening(self, case: Case) -> Messages:
        self.refuse(case)  # a library caller who skipped Target.check
        return [{"prompt": prompt(case)}]

    def request(self, case: Case, messages: Messages, stream: bool) -> tuple[str, dict[str, Any]]:
        body = self.body(case, "prompt", messages[0]["prompt"])
        body["max_tokens"] = case.max_tokens or DEFAULT_MAX_TOKENS
        exact_output(body, case, self.extras)
        openai_stream(body, stream)
        return "/completions", body

    async def receive(self, response: Response, call: ModelCall, stream: bool) -> ModelReply:
        if not stream or not sse.is_stream(response):  # a server may ignore "stream": true
            return _whole(await response.aread())
        reply = ModelReply()
        text: list[str] = []
        await read_stream(response, call, lambda chunk: _apply(chunk, reply, text, call))
        reply.text = "".join(text)
        return reply

    def extend(
        self, messages: Messages, reply: ModelReply, results: list[tuple[ToolCall, str]]
    ) -> None:
        """Never called: a completion has no tool calls, so every task is one model call."""


def refusal(case: Case) -> str:
    names = ", ".join(t.name for t in case.tools)
    return (
        f"case '{case.id}' has tools ({names}), and the legacy completions API "
        "(/v1/completions) has no tool calling: run it with --api chat or --api responses, "
        "or leave it out of this suite"
    )


def prompt(case: Case) -> str:
    """The case as one prompt (module docstring)."""
    if case.input is not None:
        return f"{case.system}\n\n{case.input}" if case.system else case.input
    turns = [f"System: {case.system}"] if case.system else []
    turns += [f"{m.role.capitalize()}: {m.content}" for m in case.messages or []]
    return "\n\n".join([*turns, "Assistant:"])


def _apply(chunk: dict[str, Any], reply: ModelReply, text: list[str], call: ModelCall) -> None:
    for choice in chunk.get("choices") or ():
        piece = text_of(choice.get("text"), "a choice's text")
        if piece:
            call.token(content=True)
            text.append(piece)
            if len(text) > PIECES:  # joined as the stream goes: memory (chat.PIECES)
                text[:] = ["".join(text)]
        finish = choice.get("finish_reason")
        if finish:
            reply.finish = finish
    chunk_end(chunk, reply)


def _whole(raw: bytes) -> ModelReply:
    doc = json_object(raw)
    try:
        choice = doc["choices"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise CallFailed("malformed_stream", "reply has no choices[0]") from exc
    reply = ModelReply(
        text=text_of(choice.get("text"), "a choice's text"),
        finish=choice.get("finish_reason"),
        model=model_name(doc.get("model")),
    )
    read_usage(usage_dict(doc.get("usage")), reply)
    return reply
