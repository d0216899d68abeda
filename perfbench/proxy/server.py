"""The proxy's HTTP server: aiohttp on 127.0.0.1 only, in perfbench's own event loop (its
tasks' clock is the proxy's clock: a model call is timed on the task it belongs to, with no
second process and no clock to reconcile).

Routes are ``/t/<token>/v1/<API path>``: ``chat/completions``, ``responses``,
``completions`` and ``messages`` are model calls, timed; ``messages/count_tokens`` and
``embeddings`` are forwarded, not timed; any other path is refused with 400 (the task fails
as ``proxy_refused``): the upstream's key goes to its model API, never elsewhere on its host.
A request without an open token gets 401, a method other than POST 405, each with a JSON
error saying why (the agent's SDK shows it)."""

from __future__ import annotations

import orjson
from aiohttp import web

from perfbench.apis.recording import Writer
from perfbench.http import CallFailed, HttpClient
from perfbench.http.limits import MAX_BODY
from perfbench.proxy import forward
from perfbench.proxy.routes import Route, Routes
from perfbench.proxy.upstream import Upstream, call_headers, family_of

HOST = "127.0.0.1"  # loopback only: the routes carry no credentials a network should see


class ProxyServer:
    def __init__(
        self,
        upstream: Upstream,
        http: HttpClient,
        read_timeout: float | None = None,
        recording: Writer | None = None,
    ) -> None:
        """``read_timeout``: how long the upstream may be silent (None: what the call's task
        has left of its case's timeout_s); ``recording``: where each call is kept."""
        self.upstream, self.http, self.read_timeout = upstream, http, read_timeout
        self.recording = recording
        self.routes = Routes()
        self._runner: web.AppRunner | None = None
        self.url = ""  # http://127.0.0.1:PORT once started

    async def start(self, port: int = 0) -> str:
        """Listen on ``port`` (0: any free one); the server's URL."""
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/t/{token}/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, port, reuse_address=True)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://{HOST}:{port}"
        return self.url

    def base_url(self, route: Route) -> str:
        """The route's base URL, as Anthropic's SDK takes it (it adds /v1/messages); OpenAI's
        SDK takes it with /v1."""
        return f"{self.url}/t/{route.token}"

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        route = self.routes.get(request.match_info["token"])
        if route is None:
            return _error(401, "this route is not open (a finished task's, or another run's)")
        tail = request.match_info["tail"]
        path = forward.api_path(tail)
        if path is None:  # never forwarded: it could leave --base-url with the real key
            message = (
                f"/{_shown(tail)} is not a model API route the proxy forwards: {forward.ROUTES}"
            )
            route.failures.append(("proxy_refused", message))
            return _error(400, message)
        if request.method != "POST":
            return _error(405, f"only model API calls (POST) are forwarded, not {request.method}")
        family = family_of(path)
        endpoint = self.upstream.endpoint(family)
        if endpoint is None:
            message = (
                f"this run's upstream, {self.upstream.name}, serves no {family} API; give "
                f"--upstream a target of that API (e.g. {_EXAMPLE[family]})"
            )
            route.failures.append(("proxy_no_upstream", message))
            return _error(502, message)
        try:
            body = await request.read()
        except ConnectionError:  # the agent hung up before its request was whole
            return _error(400, "the request broke off before its body was whole")
        headers = forward.request_headers(request.headers, endpoint)
        api = forward.api_for(path, _model(body))
        if api is not None and self.upstream.keyed:
            headers.update(call_headers(route.task, route.model_calls))
        if api is not None:
            route.model_calls += 1
        if api is None:
            return await _passthrough(request, self.http, endpoint.url(path), body, headers)
        exchange = forward.Exchange(
            route, api, path, body, endpoint.url(path), headers, self.http,
            route.model_calls - 1, self.read_timeout, self.recording,
        )  # fmt: skip
        return await forward.model_call(request, exchange)


_EXAMPLE = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-3-5-haiku-latest"}


async def _passthrough(
    request: web.Request, http: HttpClient, url: str, body: bytes, headers: dict[str, str]
) -> web.StreamResponse:
    try:
        async with http.post(url, body, headers, 60.0, _nothing) as upstream:
            data = await upstream.aread()
            kept = forward.response_headers(upstream.headers)
            return web.Response(status=upstream.status_code, body=data, headers=kept)
    except CallFailed as exc:
        return _error(502, f"the upstream failed ({exc.kind}): {exc.message}")


def _nothing() -> None:
    return None


def _model(body: bytes) -> str:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    model = doc.get("model") if isinstance(doc, dict) else None
    return model if isinstance(model, str) else ""


def _shown(path: str) -> str:
    """A refused path as the error quotes it: printable, and short."""
    text = path.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 80 else text[:77] + "..."


def _error(status: int, message: str) -> web.Response:
    text = f"perfbench proxy: {message}"
    return web.json_response({"error": {"message": text, "type": "perfbench_proxy"}}, status=status)
