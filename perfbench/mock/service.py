"""The mock server's behaviour, apart from HTTP itself: route a request, simulate the reply,
apply rate limits and faults, count what happened, and hand the HTTP layer a ``SendPlan`` of what
to send when. Keeping this free of the server library keeps it testable without sockets."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from perfbench.mock import anthropic_api, completions_api, openai_api, responses_api
from perfbench.mock.limiter import Limiter, Quota
from perfbench.mock.profile import FAULT_KINDS, Profile
from perfbench.mock.replay import Replay
from perfbench.mock.simulator import Reply, Simulator, Turn
from perfbench.mock.wire import ApiError, Frames
from perfbench.stats.histogram import Histogram

JSON = "application/json"
TIMINGS_KEPT = 200_000
KEY_HEADER = "x-perfbench-key"  # perfbench's clients name each model call, for seeded draws
CASE_HEADER = "x-perfbench-case"
RESPONSES_KEPT = 100_000  # Responses API objects a previous_response_id can continue

Api = Literal["openai", "anthropic", "responses", "completions", "count_tokens"]
APIS: dict[str, Api] = {
    "/v1/chat/completions": "openai",
    "/v1/completions": "completions",  # legacy text completions, as serving engines keep them
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
    "/v1/messages/count_tokens": "count_tokens",
}
_ID_PREFIX = {
    "openai": "chatcmpl-",
    "anthropic": "msg_",
    "responses": "resp_",
    "completions": "cmpl-",
    "count_tokens": "",
}
KNOWN_PATHS = frozenset([*APIS, "/health", "/metrics", "/stats", "/stats/timings", "/v1/models"])


@dataclass
class SendPlan:
    """What to send: wait ``delay`` seconds after arrival, send status, headers and ``body``;
    or, when ``frames`` is set, the head frames at once and token frame i at ``due[i]``.
    ``fault`` (reset, truncate, malformed) tells the HTTP layer how to break the response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    frames: Frames | None = None
    due: list[float] = field(default_factory=list)
    delay: float = 0.0
    fault: str | None = None
    holds_slot: bool = False  # admitted by the limiter: release it when the response ends


@dataclass
class Stats:
    requests: int = 0
    by_path: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)
    rate_limited: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    streams: int = 0
    client_disconnects: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    # How late the server itself wrote what was due (first token of each write, and whole
    # bodies): separates the server's own lag from a client's measurement error.
    lateness: Histogram = field(default_factory=Histogram)
    # `mock serve --timings`: per keyed request, [arrival, first write] on the monotonic clock
    # (shared by every process on the machine), so a benchmark can take the server's own
    # lateness out of a client's error. Bounded: the newest TIMINGS_KEPT.
    timings: dict[str, list[float]] | None = None

    def time_request(self, key: str | None, arrival: float) -> list[float] | None:
        if self.timings is None or key is None:
            return None
        if len(self.timings) >= TIMINGS_KEPT:
            del self.timings[next(iter(self.timings))]
        entry = self.timings[key] = [arrival, float("nan")]
        return entry

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_path": dict(self.by_path),
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "rate_limited": self.rate_limited,
            "faults": {k: self.faults.get(k, 0) for k in FAULT_KINDS},
            "streams": self.streams,
            "client_disconnects": self.client_disconnects,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "lateness": _lateness(self.lateness),
        }


class Service:
    def __init__(self, profile: Profile, seed: int, clock: Callable[[], float]) -> None:
        self.profile = profile
        self.simulator = Simulator(profile, seed)
        self.limiter = Limiter(profile.rate_limits, clock)
        self.stats = Stats()
        self._seen: Counter[bytes] = Counter()  # body digest → occurrences, for unkeyed requests
        self._responses: dict[str, responses_api.Context] = {}  # by id, oldest first
        self._ids = 0
        self.replay: Replay | None = None  # profile.replay: a recording's answers, not draws
        if profile.replay is not None:
            self.replay = Replay(Path(profile.replay.path), profile.replay.timing)

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> SendPlan:
        """``headers`` must look names up case-insensitively (or hold lower-case keys)."""
        self.stats.requests += 1
        # Any path a client sends would be a key: the unknown ones share one.
        self.stats.by_path[path if path in KNOWN_PATHS else "(other)"] += 1
        plan = self._route(method, path, headers, body)
        self.stats.by_status[plan.status] += 1
        if plan.status == 200:
            self.stats.in_flight += 1
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
        return plan

    def done(self, plan: SendPlan) -> None:
        """The response for ``plan`` has ended (sent, failed or abandoned by the client)."""
        if plan.status == 200:
            self.stats.in_flight -= 1
        if plan.holds_slot:
            plan.holds_slot = False
            self.limiter.release()

    def _metrics(self) -> bytes:
        """A serving engine's Prometheus metrics, under vLLM's names, so a run's server-metric
        scrape (`run --server-metrics URL/metrics`) has something to read from the mock."""
        model = f'{{model_name="{self.profile.name}"}}'
        stats = self.stats
        lines = [
            "# HELP vllm:num_requests_running Requests being answered (perfbench mock).",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{model} {stats.in_flight}",
            "# HELP vllm:num_requests_waiting Requests queued (the mock queues none).",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{model} 0",
            "# HELP vllm:request_success_total Requests answered with 200.",
            "# TYPE vllm:request_success_total counter",
            f"vllm:request_success_total{model} {stats.by_status.get(200, 0)}",
            "# HELP perfbench_mock_rate_limited_total Requests refused with a 429.",
            "# TYPE perfbench_mock_rate_limited_total counter",
            f"perfbench_mock_rate_limited_total {stats.rate_limited}",
        ]
        return ("\n".join(lines) + "\n").encode()

    def _route(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> SendPlan:
        anthropic = path.startswith("/v1/messages") or "anthropic-version" in headers
        if (method, path) == ("GET", "/health"):
            return _json({"status": "ok", "profile": self.profile.name})
        if (method, path) == ("GET", "/stats"):
            return _json(self.stats.as_json())
        if (method, path) == ("GET", "/metrics"):
            return SendPlan(headers={"content-type": PROMETHEUS}, body=self._metrics())
        if (method, path) == ("GET", "/stats/timings"):
            return _json({"timings": self.stats.timings})
        if (method, path) == ("GET", "/v1/models"):
            return _json(self._models(anthropic))
        if (method, path) == ("POST", "/tokenize"):  # vLLM's and SGLang's: perfbench verify
            return self._tokenize(body)
        api = APIS.get(path)
        if api is None:
            return _error(_no_route(method, path, anthropic), anthropic)
        if method != "POST":
            return _error(ApiError(405, None, f"use POST for {path}"), anthropic)
        try:
            request = _json_body(body)
            if api == "count_tokens":
                turn = anthropic_api.parse(request, "", None, counting=True)
                return _json_bytes(anthropic_api.count_tokens(self.simulator.prompt_tokens(turn)))
            return self._complete(api, headers, body, request)
        except ApiError as err:
            return _error(err, anthropic)

    def _tokenize(self, raw: bytes) -> SendPlan:
        """``{"model", "prompt"}`` (or ``messages``) → ``{"count"}`` by the simulated
        tokenizer, as the usage of a request with that text counts it."""
        try:
            request = _json_body(raw)
        except ApiError as err:
            return _error(err, False)
        prompt = request.get("prompt")
        messages = request.get("messages") if isinstance(request.get("messages"), list) else []
        contents = [m.get("content") for m in messages if isinstance(m, dict)]
        texts = [prompt] if isinstance(prompt, str) else [c for c in contents if isinstance(c, str)]
        count = self.simulator.count_texts(texts, str(request.get("model") or ""))
        return _json({"count": count})

    def _complete(
        self, api: Api, headers: Mapping[str, str], raw: bytes, body: dict[str, Any]
    ) -> SendPlan:
        if self.replay is not None:
            return self._replayed(self.replay, headers, api == "anthropic")
        key = headers.get(KEY_HEADER) or self._unkeyed(raw)
        case = headers.get(CASE_HEADER)
        if api == "responses":
            turn = responses_api.parse(body, key, case, self._context(body))
        elif api == "completions":
            turn = completions_api.parse(body, key, case)
        else:
            turn = (anthropic_api if api == "anthropic" else openai_api).parse(body, key, case)
        reply = self.simulator.reply(turn)
        anthropic = api == "anthropic"
        limit_headers: dict[str, str] = {}
        if self.limiter.active:  # no limits, no bookkeeping and no headers
            quota = self.limiter.admit(reply.prompt_tokens + reply.completion_tokens)
            limit_headers = self._rate_headers(quota, anthropic)
            if not quota.admitted:
                self.stats.rate_limited += 1
                message = (
                    f"Rate limit reached ({quota.reason}); retry after {quota.retry_after:.3f} s"
                )
                return _error(ApiError(429, None, message, headers=limit_headers), anthropic)
        if reply.fault:
            self.stats.faults[reply.fault] += 1
        plan = self._reply_plan(api, reply, body, turn)
        plan.headers.update(limit_headers)
        plan.holds_slot = self.limiter.active
        if reply.fault == "stall":
            plan.delay += reply.stall_s
        return plan

    def _replayed(self, replay: Replay, headers: Mapping[str, str], anthropic: bool) -> SendPlan:
        """The recorded answer, as it was sent (its chunks at their due times)."""
        answer = replay.answer(headers)
        if isinstance(answer, str):  # a call the recording lacks: a miss, never an invention
            return _error(ApiError(404, "replay_miss", answer), anthropic)
        if not answer.streamed:
            delay = answer.due[-1] if answer.due else 0.0
            return SendPlan(answer.status, answer.headers, b"".join(answer.chunks), delay=delay)
        self.stats.streams += 1
        frames = Frames(head=[], tokens=list(answer.chunks), tail=[])
        return SendPlan(answer.status, answer.headers, frames=frames, due=list(answer.due))

    def _reply_plan(self, api: Api, reply: Reply, body: dict[str, Any], turn: Turn) -> SendPlan:
        self._ids += 1
        anthropic = api == "anthropic"
        request_id = f"{_ID_PREFIX[api]}{self._ids:012d}"
        name = turn.model or reply.model
        if reply.fault in ("error_500", "error_503"):
            status = 500 if reply.fault == "error_500" else (529 if anthropic else 503)
            err = ApiError(
                status,
                None,
                "simulated server error"
                if status == 500
                else "simulated overload; please retry later",
            )
            plan = _error(err, anthropic)
            plan.delay = reply.ttft
            return plan
        headers = {"request-id" if anthropic else "x-request-id": request_id}
        ids = responses_api.Ids(request_id, f"{self._ids:012d}") if api == "responses" else None
        if ids is not None:
            self._remember(body, ids.response, turn, reply)
        if body.get("stream"):
            self.stats.streams += 1
            if anthropic:
                frames = anthropic_api.stream(reply, request_id, name)
            elif ids is not None:
                frames = responses_api.stream(reply, body, ids, _created(), name)
            else:
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                wire = completions_api if api == "completions" else openai_api
                frames = wire.stream(reply, request_id, _created(), name, usage)
            return SendPlan(headers=headers, frames=frames, due=reply.due(), fault=reply.fault)
        if anthropic:
            payload = anthropic_api.body(reply, request_id, name)
        elif ids is not None:
            payload = responses_api.body(reply, body, ids, _created(), name)
        elif api == "completions":
            payload = completions_api.body(reply, request_id, _created(), name)
        else:
            payload = openai_api.body(reply, request_id, _created(), name)
        headers["content-type"] = JSON
        done = reply.due()[-1] if reply.pieces else reply.ttft
        return SendPlan(headers=headers, body=payload, delay=done, fault=reply.fault)

    def _context(self, body: dict[str, Any]) -> responses_api.Context:
        """What a ``previous_response_id`` continues; OpenAI's 400 when it is not known."""
        previous = body.get("previous_response_id")
        if previous is None:
            return responses_api.Context()
        found = self._responses.get(previous) if isinstance(previous, str) else None
        if found is None:
            raise ApiError(
                400,
                "invalid_request_error",
                f"Previous response with id '{previous}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return found

    def _remember(self, body: dict[str, Any], response_id: str, turn: Turn, reply: Reply) -> None:
        # Only what a continuation needs, and only the newest RESPONSES_KEPT: a benchmark
        # makes millions of responses, and each is kept unless the request says store: false.
        if body.get("store") is False:
            return
        if len(self._responses) >= RESPONSES_KEPT:
            del self._responses[next(iter(self._responses))]
        tokens = reply.prompt_tokens + reply.completion_tokens
        self._responses[response_id] = responses_api.Context(turn.tool_results, tokens)

    def _rate_headers(self, quota: Quota, anthropic: bool) -> dict[str, str]:
        if anthropic:
            return anthropic_api.rate_headers(quota, datetime.now(UTC))
        return openai_api.rate_headers(quota)

    def _unkeyed(self, raw: bytes) -> str:
        # Without a key header, identical bodies are told apart by how often each was seen,
        # so a generic load tool still gets varied draws (deterministic per occurrence).
        digest = hashlib.blake2b(raw, digest_size=12).digest()
        if len(self._seen) > 100_000:
            self._seen.clear()
        self._seen[digest] += 1
        return f"{digest.hex()}#{self._seen[digest]}"

    def _models(self, anthropic: bool) -> dict[str, Any]:
        names = list(self.profile.models)
        if anthropic:
            data = [
                {"type": "model", "id": n, "display_name": n, "created_at": "2026-01-01T00:00:00Z"}
                for n in names
            ]
            return {"data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}
        return {
            "object": "list",
            "data": [
                {"id": n, "object": "model", "created": 0, "owned_by": "perfbench-mock"}
                for n in names
            ],
        }


def _lateness(h: Histogram) -> dict[str, float | int | None]:
    """Write lateness in milliseconds: n, p50, p99, max."""
    pct = h.percentiles((50.0, 99.0))
    ms = 1e3
    return {
        "n": h.count,
        "p50_ms": pct[50.0] * ms if pct else None,
        "p99_ms": pct[99.0] * ms if pct else None,
        "max_ms": h.max * ms if h.max is not None else None,
    }


def _created() -> int:
    return int(time.time())


PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"  # the exposition format's own type


def _json(doc: dict[str, Any], status: int = 200) -> SendPlan:
    return _json_bytes(orjson.dumps(doc), status)


def _json_bytes(body: bytes, status: int = 200) -> SendPlan:
    return SendPlan(status=status, headers={"content-type": JSON}, body=body)


def _json_body(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, None, f"the body is not valid JSON: {exc}") from exc


def _no_route(method: str, path: str, anthropic: bool) -> ApiError:
    """A 404 in each provider's words: a client must not read it as an unknown model."""
    if anthropic:
        return ApiError(404, "not_found_error", f"Not Found: {method} {path}")
    return ApiError(404, "invalid_request_error", f"Invalid URL ({method} {path})")


def _error(err: ApiError, anthropic: bool) -> SendPlan:
    body = anthropic_api.error(err) if anthropic else openai_api.error(err)
    return SendPlan(status=err.status, headers={"content-type": JSON, **err.headers}, body=body)
