"""One model call through the proxy: forwarded upstream, its answer streamed back to the agent
as it arrives, and timed onto the agent's task as a model step.

The answer is read by the same parser perfbench's own client uses for that API
(``ChatApi.receive``), through ``Tee``: every chunk is written to the agent *before* it is
parsed, so parsing adds nothing to what the agent waits for, and a chunk perfbench cannot
parse still reaches the agent (the rest of the body is forwarded as it is; the step records
the failure). The step's ``wait`` is from the request's arrival at the proxy to its going
upstream (the proxy's own overhead), its TTFT from then to the first token-bearing chunk's
arrival from upstream, as everywhere in perfbench."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from perfbench.apis.chat import ChatApi, ModelReply
from perfbench.apis.families import BY_PATH
from perfbench.apis.recording import KEPT_HEADERS, Call, Writer, texts
from perfbench.apis.retry import server_wait, window_spent
from perfbench.apis.usage import estimate_tokens, record_details
from perfbench.http import CallFailed, HttpClient, Response
from perfbench.http.limits import ERROR_READ, MAX_BODY
from perfbench.proxy.routes import Route
from perfbench.proxy.upstream import Endpoint
from perfbench.sample import status_of
from perfbench.task import ModelCall

# Not forwarded either way: hop-by-hop headers, what the proxy recomputes (length, encoding:
# the body is passed on decoded), and the agent's credentials (its task token).
_DROP_REQUEST = frozenset({
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
    "accept-encoding", "authorization", "x-api-key", "api-key", "cookie", "proxy-authorization",
    "proxy-connection",
})  # fmt: skip
_DROP_RESPONSE = frozenset({
    "content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive",
    "set-cookie", "server", "date",
})  # fmt: skip


# The API paths (after the route's /v1) the proxy forwards, and nothing else: a request is
# forwarded to one of these, spelt as here, so no path the agent writes (``..``, ``%2F``,
# ``//``, an absolute URI) can reach another path of the upstream's host with its key.
API_PATHS = frozenset({
    *BY_PATH,  # model calls (apis.families): timed
    "messages/count_tokens", "embeddings",  # forwarded as they are
})  # fmt: skip
ROUTES = ", ".join(f"/v1/{p}" for p in sorted(API_PATHS))


def api_path(tail: str) -> str | None:
    """The API path of a request's ``tail`` under its route (``v1/chat/completions``, as
    aiohttp decoded it); None for anything but an exact ``v1/<one of API_PATHS>``."""
    if not tail.startswith("v1/"):
        return None
    path = tail.removeprefix("v1/")
    return path if path in API_PATHS else None


def api_for(path: str, model: str) -> ChatApi | None:
    """The wire format of a model call at ``path`` (after the route's ``/v1``); None for a
    request that is not a model call (count_tokens, embeddings): forwarded, not timed."""
    family = BY_PATH.get(path.strip("/"))
    return family.client(model) if family is not None else None


def request_headers(headers: Mapping[str, str], endpoint: Endpoint) -> dict[str, str]:
    sent = {k: v for k, v in headers.items() if k.lower() not in _DROP_REQUEST}
    return {**sent, **endpoint.headers}


def response_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _DROP_RESPONSE}


class Tee:
    """The upstream response as ``ChatApi.receive`` reads it, each chunk written to the agent
    first. Whatever the parser leaves unread (it failed, or stopped early) is forwarded when
    the body's iterator is closed, so the agent always gets the whole answer. With ``since``
    (when the request went upstream, on ``time.monotonic``) each chunk is kept with its
    arrival, for a recording."""

    def __init__(
        self, upstream: Response, agent: web.StreamResponse, since: list[float] | None = None
    ) -> None:
        self._up, self._agent, self._since = upstream, agent, since
        self.chunks: list[tuple[float, bytes]] = []
        self.gone = False  # the agent hung up: nothing more is written to it

    @property
    def status_code(self) -> int:
        return self._up.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._up.headers

    @property
    def arrived(self) -> float | None:
        return getattr(self._up, "arrived", None)

    async def aread(self, limit: int = MAX_BODY) -> bytes:
        body = await self._up.aread(limit)
        await self._pass(body)
        return body

    async def ahead(self, n: int) -> bytes:
        return (await self.aread())[:n]

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        chunks = self._up.aiter_bytes()
        try:
            async for chunk in chunks:
                await self._pass(chunk)
                yield chunk
        finally:
            # Closed before the end (the parser raised, or stopped at its closing event):
            # the agent still gets the rest of the body. Awaiting in an async generator's
            # finally is allowed while it is being closed; only a yield is not.
            async for chunk in chunks:
                await self._pass(chunk)

    async def _pass(self, chunk: bytes) -> None:
        if self._since is not None:
            # When its bytes arrived (the client's socket stamp), taken before the write to
            # the agent: stamped after it, a busy proxy's lateness went into the recording,
            # and a replay served it again on top of its own.
            arrived = self.arrived
            at = arrived if arrived is not None else time.monotonic()
            self.chunks.append((at - self._since[0], chunk))
        if not self.gone:
            try:
                await self._agent.write(chunk)
            except ConnectionError:
                # The agent hung up (it failed on what it got, or stopped reading): the answer
                # is still read and parsed to its end, so the call is timed and classified by
                # what the upstream sent, not by the agent's leaving.
                self.gone = True


@dataclass
class Exchange:
    """One model call on its way: where it goes, and what records it."""

    route: Route
    api: ChatApi
    path: str  # the API path after /v1 (chat/completions, messages…)
    body: bytes
    url: str
    headers: dict[str, str]
    http: HttpClient
    number: int = 0  # the call's number in its task, from 0
    read_timeout: float | None = None  # None: what the task has left of its timeout_s
    recording: Writer | None = None


async def model_call(request: web.Request, ex: Exchange) -> web.StreamResponse:
    """Forward a model call and record it on the route's task as a model step (and in the
    recording, when there is one)."""
    route = ex.route
    call = route.task.model_call(ex.api.name)
    route.calls.add(call)
    try:
        return await _call(request, ex, call)
    finally:
        route.ended(call)
        if route.on_call is not None and not route.closed:
            route.on_call(call.step, call.step.model or "")


async def _call(request: web.Request, ex: Exchange, call: ModelCall) -> web.StreamResponse:
    route, task = ex.route, ex.route.task
    doc = _json(ex.body)
    asked = doc.get("model")
    call.step.model = asked if isinstance(asked, str) and asked else None  # the agent's choice
    call.step.stream = bool(doc.get("stream"))  # also the agent's: says who to ask for TTFT
    since = [time.monotonic()]

    def sent() -> None:
        call.sent()
        since[0] = time.monotonic()

    agent: web.StreamResponse | None = None
    try:
        wait = ex.read_timeout if ex.read_timeout is not None else max(1.0, task.time_left())
        async with ex.http.post(ex.url, ex.body, ex.headers, wait, sent) as upstream:
            call.headers(upstream.status_code, getattr(upstream, "headers_at", None))
            try:
                agent = await _answer_headers(request, upstream)
            except ConnectionError:  # the agent hung up: the call ends, nothing to answer
                _failure(route, call, "cancelled", "the agent hung up before the answer began")
                return web.Response(status=499)
            tee = Tee(upstream, agent, since if ex.recording is not None else None)
            if upstream.status_code >= 400:
                await _refused(route, call, tee)
            else:
                reply = await _relay(route, call, ex.api, tee, bool(doc.get("stream")))
                if reply is not None:
                    _recorded(route, call, ex.api, reply, doc)
    except CallFailed as exc:
        _failure(route, call, exc.kind, exc.message)
        if agent is None:  # nothing was sent yet: say why, as a gateway would
            return _bad_gateway(exc)
        agent.force_close()  # the answer broke off: so does the agent's
        return agent
    _record(ex, doc, upstream.status_code, upstream.headers, tee.chunks)
    if tee.gone:
        agent.force_close()
    else:
        await agent.write_eof()
    return agent


def _record(
    ex: Exchange,
    doc: Any,
    status: int,
    headers: Mapping[str, str],
    chunks: list[tuple[float, bytes]],
) -> None:
    if ex.recording is None or ex.route.closed:
        return
    task = ex.route.task
    kept = {k: headers[k] for k in KEPT_HEADERS if k in headers}
    model = doc.get("model") if isinstance(doc.get("model"), str) else ""
    call = Call(task.case.id, task.phase, task.run, task.iteration, ex.number, ex.path,
                model, status, kept, texts(chunks))  # fmt: skip
    ex.recording.write(call)


async def _answer_headers(request: web.Request, upstream: Response) -> web.StreamResponse:
    headers = response_headers(upstream.headers)
    agent = web.StreamResponse(status=upstream.status_code, headers=headers)
    await agent.prepare(request)
    return agent


async def _relay(
    route: Route, call: ModelCall, api: ChatApi, tee: Tee, stream: bool
) -> ModelReply | None:
    """The answer, passed to the agent while it is parsed; None when perfbench could not
    parse it (the agent got it all the same; the step says the call failed)."""
    try:
        reply = await api.receive(tee, call, stream)
    except CallFailed as exc:
        _failure(route, call, exc.kind, exc.message)
        return None
    except (LookupError, TypeError, ValueError, AttributeError) as exc:
        _failure(route, call, "malformed_stream", f"unexpected reply shape: {exc!r}")
        return None
    call.arrived(tee.arrived)  # the last bytes' arrival
    return reply


def _recorded(route: Route, call: ModelCall, api: ChatApi, reply: ModelReply, doc: Any) -> None:
    if route.closed:  # the task ended while the answer was on its way: not its call now
        return
    task = route.task
    call.finish(tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)
    record_details(task, call.step, reply, api.model)
    if reply.tokens_out is None:  # no usage from the API: estimated, and said so
        estimate_tokens(task, reply, doc)
        call.set_tokens(reply.tokens_in, reply.tokens_out)
    route.tool_calls.extend(c.name for c in reply.tool_calls)


async def _refused(route: Route, call: ModelCall, tee: Tee) -> None:
    """An error answer (429, 5xx, 400…): passed on whole; the step failed, a 429 counted. A
    replaying mock's miss (a call its recording lacks) is its own kind."""
    body = await tee.aread()
    status = tee.status_code
    kind = "rate_limited" if status == 429 else f"http_{status}"
    if b'"replay_miss"' in body[:ERROR_READ]:
        kind = "replay_miss"
    if status == 429 and not route.closed:
        route.task.refused(server_wait(tee.headers, datetime.now(UTC)), window_spent(tee.headers))
    excerpt = " ".join(body[:300].decode(errors="replace").split())
    _failure(route, call, kind, f"HTTP {status}: {excerpt}" if excerpt else f"HTTP {status}")


def _bad_gateway(exc: CallFailed) -> web.StreamResponse:
    """The upstream could not be reached or failed before answering: the agent gets a 502
    with the reason."""
    message = f"perfbench proxy: the upstream failed ({exc.kind}): {exc.message}"
    return web.json_response({"error": {"message": message, "type": exc.kind}}, status=502)


def _failure(route: Route, call: ModelCall, kind: str, message: str) -> None:
    if route.closed:
        return
    call.finish(tokens_in=None, tokens_out=None, status=status_of(kind))
    route.failures.append((kind, message))


def _json(body: bytes) -> Any:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}
