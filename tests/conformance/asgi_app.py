"""The conformance servers' application (test_servers.py): one plain ASGI app, no framework, so
what reaches the client is each server's own HTTP/1.1 (uvicorn's h11 and httptools, hypercorn,
granian). Every route answers a POST; ``python asgi_app.py KIND PORT [CERT KEY]`` serves it.

    /json          a body with a Content-Length: the client's port (keep-alive shows) and the
                   request body's length
    /chunks        a body in three parts, no length: chunked
    /stream?n=N    N server-sent events, one a send (a model's token stream)
    /drop?n=N      N events, then the application fails: the server closes mid-body
    /headers?size=N  a JSON body under a header ``x-big`` of N bytes
    /v1/chat/completions       an OpenAI-compatible answer of three tokens, streamed or not
    /fail/v1/chat/completions  the same stream, failing after its first two chunks
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def event(i: int) -> bytes:
    return b'data: {"i": %d}\n\n' % i


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    body = await _body(receive)
    query = {k: int(v[0]) for k, v in parse_qs(scope["query_string"].decode()).items()}
    route = ROUTES[scope["path"]]
    await route(scope, body, query, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def _start(send: Send, kind: bytes, *extra: tuple[bytes, bytes], length: int = -1) -> None:
    headers = [(b"content-type", kind), *extra]
    if length >= 0:
        headers.append((b"content-length", b"%d" % length))
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def _json(scope: Scope, body: bytes, query: dict[str, int], send: Send) -> None:
    data = json.dumps({"port": scope["client"][1], "got": len(body)}).encode()
    await _start(send, b"application/json", length=len(data))
    await send({"type": "http.response.body", "body": data})


async def _chunks(scope: Scope, body: bytes, query: dict[str, int], send: Send) -> None:
    await _start(send, b"text/plain")
    for part in (b"one ", b"two ", b"three"):
        await send({"type": "http.response.body", "body": part, "more_body": True})
        await asyncio.sleep(0.001)
    await send({"type": "http.response.body", "body": b""})


async def _events(query: dict[str, int], send: Send) -> None:
    await _start(send, b"text/event-stream")
    for i in range(query.get("n", 5)):
        await send({"type": "http.response.body", "body": event(i), "more_body": True})
        await asyncio.sleep(0.001)


async def _stream(scope: Scope, body: bytes, query: dict[str, int], send: Send) -> None:
    await _events(query, send)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _drop(scope: Scope, body: bytes, query: dict[str, int], send: Send) -> None:
    await _events(query, send)
    raise RuntimeError("the application fails mid-stream (on purpose)")


async def _headers(scope: Scope, body: bytes, query: dict[str, int], send: Send) -> None:
    await _start(send, b"application/json", (b"x-big", b"b" * query["size"]), length=2)
    await send({"type": "http.response.body", "body": b"{}"})


WORDS = ("Paris ", "is ", "France's capital.")
USAGE = {"prompt_tokens": 9, "completion_tokens": len(WORDS), "total_tokens": 9 + len(WORDS)}


def _chunk(delta: dict[str, str] | None = None, usage: dict[str, int] | None = None) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}]
    data = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": choices}
    if usage is not None:
        data["usage"] = usage
    return b"data: " + json.dumps(data).encode() + b"\n\n"


async def _chat(scope: Scope, body: bytes, query: dict[str, int], send: Send) -> None:
    failing = scope["path"].startswith("/fail/")
    if not json.loads(body).get("stream"):
        message = {"role": "assistant", "content": "".join(WORDS)}
        answer = json.dumps({"id": "c", "object": "chat.completion", "model": "m", "usage": USAGE,
                             "choices": [{"index": 0, "message": message,
                                          "finish_reason": "stop"}]}).encode()  # fmt: skip
        await _start(send, b"application/json", length=len(answer))
        await send({"type": "http.response.body", "body": answer})
        return
    await _start(send, b"text/event-stream")
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": word}) for word in WORDS]
    chunks += [_chunk(usage=USAGE), b"data: [DONE]\n\n"]
    for i, chunk in enumerate(chunks):
        if failing and i == 2:
            raise RuntimeError("the model server fails mid-answer (on purpose)")
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await asyncio.sleep(0.002)
    await send({"type": "http.response.body", "body": b""})


ROUTES = {"/json": _json, "/chunks": _chunks, "/stream": _stream, "/drop": _drop,
          "/headers": _headers, "/v1/chat/completions": _chat,
          "/fail/v1/chat/completions": _chat}  # fmt: skip


def serve(kind: str, port: int, cert: str | None, key: str | None) -> None:
    """Serve ``app`` with one server, in the foreground, until SIGINT or SIGTERM."""
    if kind.startswith("uvicorn"):
        import uvicorn

        http = kind.partition("-")[2]
        uvicorn.run(app, host="127.0.0.1", port=port, http=http, log_level="warning",
                    ssl_certfile=cert, ssl_keyfile=key)  # fmt: skip
    elif kind == "hypercorn":
        from hypercorn.asyncio import serve as hypercorn_serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.certfile, config.keyfile = cert, key
        config.loglevel = "WARNING"
        asyncio.run(hypercorn_serve(app, config))  # type: ignore[arg-type]
    else:
        raise SystemExit(f"unknown server {kind!r} (granian is started by its own command)")


if __name__ == "__main__":
    args = sys.argv[1:]
    serve(args[0], int(args[1]), *(args[2:4] if len(args) > 2 else (None, None)))
