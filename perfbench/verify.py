"""``perfbench verify``: checks, against an OpenAI-compatible chat endpoint, the figures
perfbench relies on, before they are trusted (issue 42). A few requests, each row a check:

* input tokens: the server's ``usage.prompt_tokens`` against a reference count of the same
  text, as the difference between a short and a long prompt (so that the chat template's
  constant cancels): the server's own ``/tokenize`` where it offers one (vLLM, SGLang), else
  the offline tokenizer when it is the model's own (OpenAI's families). A server that
  overstates prompt tokens (a client/server tokenizer mismatch, vLLM #44708) fails here;
* the chat template's tokens per request: ``usage.prompt_tokens`` minus the prompt's count;
* output tokens: reported against ``max_tokens`` (honoured?) and against the reference count
  of the streamed text;
* streaming: whether the tokens arrive spread over time or in one burst;
* whether ``usage`` comes in the stream (``stream_options.include_usage``);
* the server's clock against this one (the ``Date`` header);
* the prices perfbench will use for the model, and their source and date.

Failures of the endpoint are rows that fail; an endpoint that cannot be reached at all is a
``TargetError``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx
import orjson

from perfbench.errors import TargetError
from perfbench.stats import tokens

Verdict = Literal["pass", "fail", "info"]
SHORT = "Reply with one short sentence about the sea."
# Plain English prose, so that every tokenizer counts it in ordinary words.
FILLER = (
    "The harbour was quiet in the early morning, and the fishing boats rocked gently against "
    "the stone wall while gulls circled above the nets. An old keeper walked along the pier "
    "with a lantern, checking the ropes one by one, as he had done every day for forty years. "
) * 4
LONG_ANSWER = "Write a long story about a lighthouse keeper and a storm, in plain English."
ASK_TOKENS = 64  # max_tokens of the streamed request
# Chunks closer than this on average came in one burst (parsed from one read), not as the
# model made them: no server decodes 5,000 tokens a second for one request.
BURST_GAP_S = 0.0002
_OPENAI_FAMILIES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-")


@dataclass(frozen=True)
class Bars:
    tolerance: float = 0.05  # token counts may differ by this share (and one token)
    max_skew: float = 5.0  # seconds the server's clock may be off this one's


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ending in /v1, as OpenAI's clients take it
    model: str
    headers: Mapping[str, str] = field(default_factory=dict)
    price_ref: str | None = None  # "provider/model" for the price row


@dataclass(frozen=True)
class Check:
    key: str
    name: str
    measured: str
    expected: str
    verdict: Verdict
    value: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "measured": self.measured,
            "expected": self.expected,
            "verdict": self.verdict,
            "value": self.value,
        }


@dataclass
class _Reply:
    text: str = ""
    usage: dict[str, Any] | None = None
    sent_wall: float = 0.0
    received_wall: float = 0.0
    date: str | None = None
    chunk_times: list[float] = field(default_factory=list)  # content chunks, perf_counter


class Counter:
    """The reference token count: the server's ``/tokenize`` when offered, else the offline
    tokenizer (judged only when it is the model's own)."""

    def __init__(self, client: httpx.AsyncClient, endpoint: Endpoint, offered: bool) -> None:
        self.client, self.endpoint, self.offered = client, endpoint, offered
        self.encoding = tokens.encoding_for(endpoint.model)

    @property
    def name(self) -> str:
        return "the server's /tokenize" if self.offered else f"offline {self.encoding}"

    @property
    def exact(self) -> bool:
        model = self.endpoint.model.rsplit("/", 1)[-1].lower()
        return self.offered or model.startswith(_OPENAI_FAMILIES)

    async def count(self, text: str) -> int:
        if self.offered:
            found = await _tokenize(self.client, self.endpoint, text)
            assert found is not None  # offered: answered a first time
            return found
        return tokens.count(text, self.encoding)


async def verify(endpoint: Endpoint, bars: Bars, pricer: Any = None) -> list[Check]:
    """Every check against ``endpoint``, in the table's order."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0)) as client:
        try:
            short = await _chat(client, endpoint, SHORT, 16)
        except httpx.HTTPError as exc:
            raise TargetError(
                f"verify: {endpoint.base_url}/chat/completions did not answer "
                f"({type(exc).__name__}: {exc}); is the server up, and the URL its /v1?"
            ) from None
        long = await _chat(client, endpoint, f"{SHORT} {FILLER}", 16)
        streamed = await _chat(client, endpoint, LONG_ANSWER, ASK_TOKENS, stream=True)
        counter = Counter(client, endpoint, await _tokenize(client, endpoint, SHORT) is not None)
        rows = [
            *(await _input_rows(counter, short, long, bars)),
            *(await _output_rows(counter, streamed, bars)),
            _streaming_row(streamed),
            _stream_usage_row(streamed),
            _skew_row([short, long, streamed], bars),
        ]
    rows.append(_price_row(endpoint, pricer))
    return rows


async def _chat(
    client: httpx.AsyncClient, endpoint: Endpoint, prompt: str, max_tokens: int, *,
    stream: bool = False,
) -> _Reply:  # fmt: skip
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    url = f"{endpoint.base_url.rstrip('/')}/chat/completions"
    reply = _Reply(sent_wall=time.time())
    headers = {"content-type": "application/json", **endpoint.headers}
    async with client.stream("POST", url, content=orjson.dumps(body), headers=headers) as resp:
        reply.date = resp.headers.get("date")
        reply.received_wall = time.time()
        if resp.status_code != 200:
            detail = (await resp.aread())[:300].decode(errors="replace")
            raise TargetError(f"verify: {url} answered HTTP {resp.status_code}: {detail}")
        if stream:
            await _read_stream(resp, reply)
        else:
            doc = orjson.loads(await resp.aread())
            reply.text = ((doc.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
            reply.usage = doc.get("usage")
    return reply


async def _read_stream(resp: httpx.Response, reply: _Reply) -> None:
    pieces = []
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = orjson.loads(data)
        if chunk.get("usage"):
            reply.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            text = (choice.get("delta") or {}).get("content")
            if text:
                reply.chunk_times.append(time.perf_counter())
                pieces.append(text)
    reply.text = "".join(pieces)


async def _tokenize(client: httpx.AsyncClient, endpoint: Endpoint, text: str) -> int | None:
    """vLLM's and SGLang's ``POST /tokenize`` (at the server's root): the count of ``text``
    by the server's own tokenizer, or None when it offers none."""
    root = endpoint.base_url.rstrip("/").removesuffix("/v1")
    body = orjson.dumps({"model": endpoint.model, "prompt": text, "add_special_tokens": False})
    headers = {"content-type": "application/json", **endpoint.headers}
    try:
        resp = await client.post(f"{root}/tokenize", content=body, headers=headers)
        doc = resp.json() if resp.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return None
    if isinstance(doc.get("count"), int):
        return int(doc["count"])
    return len(doc["tokens"]) if isinstance(doc.get("tokens"), list) else None


def _within(measured: float, reference: float, bars: Bars) -> bool:
    """Equal within the tolerance, or within one token (a rounding at the edge of a text)."""
    return abs(measured - reference) <= max(1.0, bars.tolerance * reference)


async def _input_rows(counter: Counter, short: _Reply, long: _Reply, bars: Bars) -> list[Check]:
    used = [(r.usage or {}).get("prompt_tokens") for r in (short, long)]
    if not all(isinstance(u, int) for u in used):
        return [
            Check(
                "input_tokens",
                "input tokens: usage vs count",
                "no usage in the reply",
                "usage.prompt_tokens",
                "fail",
            ),
        ]
    u_short, u_long = int(used[0] or 0), int(used[1] or 0)
    ref_short = await counter.count(SHORT)
    ref_added = await counter.count(f"{SHORT} {FILLER}") - ref_short
    ratio = (u_long - u_short) / ref_added if ref_added else None
    judged = counter.exact and ratio is not None
    ok = ratio is not None and _within(u_long - u_short, ref_added, bars)
    verdict: Verdict = ("pass" if ok else "fail") if judged else "info"
    input_row = Check(
        "input_tokens",
        f"input tokens: usage vs {counter.name}",
        f"{u_long - u_short} for {ref_added} counted ({_ratio(ratio)})",
        f"×1.00 ±{bars.tolerance:.0%}" if judged else "not judged: a proxy tokenizer",
        verdict,
        ratio,
    )
    overhead = u_short - ref_short
    template = Check(
        "template_overhead",
        "chat template: tokens per request",
        f"{overhead} ({u_short} in usage, {ref_short} in the prompt)",
        "a few (role markers)",
        "info",
        float(overhead),
    )
    return [input_row, template, *(await _offline_row(counter, ref_added))]


async def _offline_row(counter: Counter, served: int) -> list[Check]:
    """perfbench's offline count (its estimate when a reply has no usage) against the
    server's /tokenize for the same text: how far those estimates would be off."""
    if not counter.offered or not served:
        return []
    both = tokens.count(f"{SHORT} {FILLER}", counter.encoding)
    offline = both - tokens.count(SHORT, counter.encoding)  # the same text the server counted
    ratio = offline / served
    return [
        Check(
            "offline_estimate",
            f"offline {counter.encoding} vs the server's /tokenize",
            f"{offline} for {served} ({_ratio(ratio)})",
            "shown: perfbench's estimate when a reply has no usage",
            "info",
            ratio,
        )
    ]


async def _output_rows(counter: Counter, streamed: _Reply, bars: Bars) -> list[Check]:
    reported = (streamed.usage or {}).get("completion_tokens")
    if not isinstance(reported, int):
        return [
            Check(
                "output_tokens_asked",
                "output tokens: reported vs asked",
                "no usage in the reply",
                f"≤ {ASK_TOKENS} (max_tokens)",
                "info",
            ),
        ]
    asked = Check(
        "output_tokens_asked",
        "output tokens: reported vs asked",
        f"{reported} of {ASK_TOKENS} asked",
        f"≤ {ASK_TOKENS} (max_tokens honoured)",
        "pass" if reported <= ASK_TOKENS else "fail",
        float(reported),
    )
    # A reasoning model's completion tokens include its hidden reasoning: not in the text.
    details = (streamed.usage or {}).get("completion_tokens_details") or {}
    hidden = details.get("reasoning_tokens") if isinstance(details, dict) else None
    visible = reported - (hidden if isinstance(hidden, int) else 0)
    counted = await counter.count(streamed.text)
    ok = _within(visible, counted, bars)
    verdict: Verdict = ("pass" if ok else "fail") if counter.exact else "info"
    ratio = visible / counted if counted else None
    versus = Check(
        "output_tokens_counted",
        f"output tokens: reported vs {counter.name}",
        f"{visible} for {counted} counted ({_ratio(ratio)})",
        f"×1.00 ±{bars.tolerance:.0%}" if counter.exact else "not judged: a proxy tokenizer",
        verdict,
        ratio,
    )
    return [asked, versus]


def _streaming_row(streamed: _Reply) -> Check:
    times = streamed.chunk_times
    if len(times) < 2:
        return Check("streaming", "streaming: tokens spread over time",
                     f"{len(times)} content chunk(s)", "2 or more chunks", "fail")  # fmt: skip
    span = times[-1] - times[0]
    gap = span / (len(times) - 1)
    return Check(
        "streaming",
        "streaming: tokens spread over time",
        f"{len(times)} chunks over {span * 1000:.1f} ms ({gap * 1000:.2f} ms apart)",
        f"≥ {BURST_GAP_S * 1000:g} ms apart on average (not one burst)",
        "fail" if gap < BURST_GAP_S else "pass",
        gap,
    )


def _stream_usage_row(streamed: _Reply) -> Check:
    found = streamed.usage is not None
    return Check(
        "stream_usage",
        "usage in the stream",
        "yes" if found else "no: perfbench will count tokens offline",
        "usage in the last chunk (stream_options.include_usage)",
        "pass" if found else "info",
        1.0 if found else 0.0,
    )


def _skew_row(replies: list[_Reply], bars: Bars) -> Check:
    skews = []
    for r in replies:
        if r.date is None:
            continue
        try:
            server = parsedate_to_datetime(r.date).timestamp()
        except (TypeError, ValueError):
            continue
        # Date is whole seconds: the server's clock read somewhere in [date, date + 1).
        skews.append(server + 0.5 - (r.sent_wall + r.received_wall) / 2)
    if not skews:
        return Check("clock_skew", "server clock vs this one (Date header)", "no Date header",
                     f"within ±{bars.max_skew:g} s", "info")  # fmt: skip
    skew = sorted(skews)[len(skews) // 2]
    return Check(
        "clock_skew",
        "server clock vs this one (Date header)",
        f"{skew:+.1f} s (±0.5 s: Date has whole seconds)",
        f"within ±{bars.max_skew:g} s",
        "pass" if abs(skew) <= bars.max_skew + 0.5 else "fail",
        skew,
    )


def _price_row(endpoint: Endpoint, pricer: Any) -> Check:
    ref = endpoint.price_ref
    if pricer is None or ref is None:
        return Check("prices", "prices perfbench will use", "no price reference",
                     "a price, or --prices FILE", "info")  # fmt: skip
    per_in, per_out = pricer.cost(ref, 1_000_000, 0), pricer.cost(ref, 0, 1_000_000)
    source = pricer.source()
    where = source["overrides"] or source["package"]
    when = source["overrides_date"] or source["timestamp"]
    if per_in is None and per_out is None:
        return Check("prices", f"prices perfbench will use ({ref})", f"unpriced ({where})",
                     "a price, or --prices FILE", "info")  # fmt: skip
    return Check(
        "prices",
        f"prices perfbench will use ({ref})",
        f"${per_in or 0:g} in, ${per_out or 0:g} out per 1M tokens",
        f"from {where}, as of {when}",
        "info",
    )


def _ratio(ratio: float | None) -> str:
    return "–" if ratio is None else f"×{ratio:.2f}"
