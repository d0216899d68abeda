"""The simulated model behind both mocks: given one model request (a ``Turn``), decide the
``Reply``: answer text or the next tool call, token counts by the simulated tokenizer, when each
token is due, and any injected fault.

Every draw comes from a generator seeded by (seed, the turn's key) alone, so the profile and the
seed fully determine what a request receives, whatever the order or concurrency of requests."""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from perfbench.language import detect_language
from perfbench.mock.profile import Profile, SimModel

_MS = 1e-3

# Filler text per language, cycled to the drawn length. Content is irrelevant to timing; only
# its script matters to the simulated tokenizers.
_BANK = {
    "en": "Your order has shipped and should arrive within two working days. ",
    "es": "Su pedido ha sido enviado y debería llegar en dos días hábiles. ",
    "zh": "您的订单已经发货，预计两个工作日内送达。",
    "ja": "ご注文の商品は発送済みで、二営業日以内に届く予定です。",
    "ko": "주문하신 상품이 발송되었으며 영업일 기준 이틀 안에 도착합니다. ",
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)


ToolChoice = Literal["auto", "none", "required"]


@dataclass(slots=True)
class Turn:
    """A provider-neutral view of one model request. Not frozen: a frozen dataclass sets each
    of its fields through ``object.__setattr__``, a cost per request the server felt."""

    model: str
    messages: tuple[str, ...]  # the text of every message, for counting prompt tokens
    tools: tuple[ToolSpec, ...] = ()
    tool_results: int = 0  # tool results already in the conversation
    max_tokens: int | None = None
    key: str = ""  # seeds this reply's draws
    case: str | None = None  # a case id, when the client names it, for scripted plans
    tool_choice: ToolChoice = "auto"
    forced_tool: str | None = None  # tool_choice naming one tool: that tool, every turn
    parallel: bool = True  # the client allows several tool calls in one turn
    # Structured output: the answer is JSON fitting this schema ({} for any JSON object).
    schema: dict[str, Any] | None = None
    min_tokens: int | None = None  # vLLM's: no end of answer before this many tokens
    ignore_eos: bool = False  # vLLM's: answer until max_tokens
    context_tokens: int = 0  # prompt tokens held by the server (a previous_response_id)


Finish = Literal["stop", "tool_calls", "length"]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call in a reply: its arguments are ``pieces[start:end]`` of the reply."""

    name: str
    id: str
    start: int
    end: int


@dataclass(slots=True)
class Reply:
    model: str  # the simulated model that answered
    pieces: list[str]  # one string per output token: answer text, or tool-call argument JSON
    prompt_tokens: int
    ttft: float  # seconds from the request to the first token
    gaps: list[float]  # seconds between consecutive tokens (len(pieces) - 1 of them)
    finish: Finish = "stop"
    calls: tuple[Call, ...] = ()  # the tool calls, in order; none for an answer
    fault: str | None = None
    stall_s: float = 0.0

    @property
    def completion_tokens(self) -> int:
        return len(self.pieces)

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def arguments(self, call: Call) -> str:
        return "".join(self.pieces[call.start : call.end])

    def due(self) -> list[float]:
        """When each token is due, in seconds from the request's arrival."""
        return list(itertools.accumulate(self.gaps, initial=self.ttft)) if self.pieces else []


class Simulator:
    def __init__(self, profile: Profile, seed: int = 0) -> None:
        self.profile = profile
        self.seed = seed
        # Seeding a generator costs ~10 µs; a profile with nothing to draw needs none.
        self._draws = profile.stochastic or profile.faults.pick(0.0) is not None
        self._zero = random.Random(0)
        self._models: dict[str, tuple[str, SimModel]] = {}

    def rng(self, key: str) -> random.Random:
        if not self._draws:
            return self._zero
        digest = hashlib.blake2b(f"{self.seed}|{key}".encode(), digest_size=8).digest()
        return random.Random(int.from_bytes(digest))

    def reply(self, turn: Turn) -> Reply:
        profile = self.profile
        rng = self.rng(turn.key)
        fault = profile.faults.pick(rng.random()) if self._draws else None
        name, model = self._model(turn.model)
        prompt = turn.context_tokens + self.prompt_tokens(turn, model)
        tools = self._next_tools(turn)
        calls: list[Call] = []
        finish: Finish = "stop"
        if tools:
            pieces: list[str] = []
            for i, tool in enumerate(tools):
                arguments = orjson.dumps(_arguments(tool.parameters)).decode()
                start = len(pieces)
                pieces += _split(arguments, model.tokens(len(arguments), "en"))
                calls.append(
                    Call(tool.name, _tool_id(turn.key, turn.tool_results + i), start, len(pieces))
                )
            finish = "tool_calls"
        else:
            pieces, finish = self._text_reply(turn, model, rng)
        ttft = profile.ttft_ms.draw(rng) * _MS
        itl = profile.itl_ms
        if itl.fixed is not None:  # the common benchmark case: no draws at all
            gaps = [itl.fixed * _MS] * (len(pieces) - 1)
        else:
            gaps = [itl.draw(rng) * _MS for _ in range(len(pieces) - 1)]
        return Reply(
            model=name,
            pieces=pieces,
            prompt_tokens=prompt,
            ttft=ttft,
            gaps=gaps,
            finish=finish,
            calls=tuple(calls),
            fault=fault,
            stall_s=profile.faults.stall_s,
        )

    def prompt_tokens(self, turn: Turn, model: SimModel | None = None) -> int:
        """The turn's prompt by the simulated tokenizer (what count_tokens answers)."""
        model = model or self._model(turn.model)[1]
        return sum(model.tokens(len(t), _language(t)) for t in turn.messages)

    def count_texts(self, texts: list[str], model: str) -> int:
        """``texts`` by ``model``'s simulated tokenizer, each as a message's content is."""
        found = self._model(model)[1]
        return sum(found.tokens(len(t), _language(t)) for t in texts)

    def _text_reply(
        self, turn: Turn, model: SimModel, rng: random.Random
    ) -> tuple[list[str], Finish]:
        """The answer's tokens: filler in the conversation's language (or JSON fitting the
        requested schema), as long as the profile draws, within the request's length limits."""
        limit = turn.max_tokens
        if turn.schema is not None:
            text = orjson.dumps(_arguments(turn.schema) or {"answer": "ok"}).decode()
            pieces = _split(text, model.tokens(len(text), "en"))
            # JSON cut short is what a real model sends at its limit: the client must cope.
            if limit is not None and len(pieces) > limit:
                return pieces[:limit], "length"
            return pieces, "stop"
        language = _language(turn.messages[-1]) if turn.messages else "en"
        chars = max(1, round(self.profile.output_chars.draw(rng)))
        tokens = model.tokens(chars, language)
        wanted = limit if turn.ignore_eos and limit is not None else None
        if turn.min_tokens is not None and tokens < turn.min_tokens:
            wanted = max(wanted or 0, turn.min_tokens)
        if wanted is not None:  # a set length: enough text for that many tokens, one each
            tokens = wanted
            chars = max(chars, tokens, math.ceil(tokens / model.rate(language)))
        pieces = list(_answer(language, chars, tokens))
        if limit is not None and len(pieces) > limit:
            return pieces[:limit], "length"
        return pieces, "length" if wanted is not None and wanted == limit else "stop"

    def _model(self, requested: str) -> tuple[str, SimModel]:
        # Matching shell patterns on every request showed in profiles; names repeat.
        found = self._models.get(requested)
        if found is None:
            if len(self._models) > 1000:
                self._models.clear()
            found = self._models[requested] = self.profile.model(requested)
        return found

    def _next_tools(self, turn: Turn) -> list[ToolSpec]:
        """The tools this turn calls: the case's scripted plan, else the request's tools in
        order, ``parallel_tool_calls`` of them per turn, until all were called; then none (an
        answer). ``tool_choice`` overrides as on the real APIs: ``none`` answers, a named tool
        is called every turn, and ``required`` starts the tools over rather than answer."""
        if not turn.tools or turn.tool_choice == "none":
            return []
        plan = self.profile.plans.get(turn.case or "") if self.profile.plans else None
        width = self.profile.parallel_tool_calls if turn.parallel else 1
        if plan is None and width == 1 and turn.forced_tool is None:  # the common case, quickly
            if turn.tool_results < len(turn.tools):
                return [turn.tools[turn.tool_results]]
            if turn.tool_choice != "required":
                return []
        by_name = {t.name: t for t in turn.tools}
        if turn.forced_tool is not None:
            return [by_name.get(turn.forced_tool, ToolSpec(turn.forced_tool))]
        if plan is not None:
            turns = [[entry] if isinstance(entry, str) else list(entry) for entry in plan]
        else:
            names = [t.name for t in turn.tools]
            turns = [names[i : i + width] for i in range(0, len(names), width)]
        index = _position(turns, turn.tool_results)
        if index >= len(turns):
            total = sum(len(t) for t in turns)
            if turn.tool_choice != "required" or not total:
                return []
            index = _position(turns, turn.tool_results % total)
        names = turns[index] if turn.parallel else turns[index][:1]
        return [by_name.get(n, ToolSpec(n)) for n in names]


def _position(turns: list[list[str]], results: int) -> int:
    """Which turn of a plan comes after ``results`` tool results: each turn's calls, once all
    answered, move it on (a client that runs a turn's calls one by one is still in that turn)."""
    index = done = 0
    while index < len(turns) and done + len(turns[index]) <= results:
        done += len(turns[index])
        index += 1
    return index


@functools.lru_cache(maxsize=4096)
def _language(text: str) -> str:
    # Conversations resend the same messages every turn; the cache saves rescanning them.
    return detect_language(text)


@functools.lru_cache(maxsize=4096)
def _answer(language: str, chars: int, tokens: int) -> tuple[str, ...]:
    return tuple(_split(_filler(language, chars), tokens))


def _filler(language: str, chars: int) -> str:
    bank = _BANK.get(language, _BANK["en"])
    return (bank * (chars // len(bank) + 1))[:chars]


def _split(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` consecutive pieces of near-equal length (one per token)."""
    parts = max(1, min(parts, len(text))) if text else 0
    size, extra = divmod(len(text), parts) if parts else (0, 0)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Plausible arguments for a JSON schema: required properties (else all), typed placeholders."""
    props: dict[str, Any] = schema.get("properties") or {}
    wanted = schema.get("required") or list(props)
    return {name: _placeholder(props.get(name) or {}, name) for name in wanted}


def _placeholder(schema: dict[str, Any], name: str) -> Any:
    kind = schema.get("type")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return _arguments(schema)
    return f"{name}-1"


def _tool_id(key: str, index: int) -> str:
    return "call_" + hashlib.blake2b(f"{key}|{index}".encode(), digest_size=12).hexdigest()
