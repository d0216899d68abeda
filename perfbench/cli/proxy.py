"""``perfbench proxy``: the recording proxy on its own, for an agent you start yourself (or a
benchmark of the proxy's overhead). One route for the whole session; its first line on stdout
is the base URL an OpenAI client takes (``…/v1``). Ctrl-C or SIGTERM stops it and prints the
timing table of the calls it saw, per model (``--json``: a JSON line per call as it ends, and
the table as one at the end)."""

from __future__ import annotations

import asyncio
import signal
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.table import Table

from perfbench.cli.app import app
from perfbench.cli.output import err, errors, out
from perfbench.errors import PerfbenchError
from perfbench.report.format import seconds
from perfbench.stats.calls import CallFigures, call_doc
from perfbench.suite import Case

if TYPE_CHECKING:
    from perfbench.apis.recording import Writer
    from perfbench.proxy.upstream import Upstream
    from perfbench.sample import Step
    from perfbench.targets.target_spec import TargetSpec

# The session's calls are steps of one long task; its timeout is not the calls' (--read-timeout).
SESSION_CASE = Case(id="proxy", language="en", input="-", timeout_s=3600)


@dataclass(frozen=True)
class _Options:
    read_timeout: float
    port: int
    record: Path | None
    as_json: bool


@app.command("proxy")
def proxy(
    upstream: Annotated[
        str,
        typer.Option(
            help="Where calls go: mock+http[:profile] (the mock server, started here) or a "
            "model target (openai/gpt-4o-mini; its key from the provider's variable or "
            "--api-key-env)."
        ),
    ] = "mock+http",
    base_url: Annotated[str | None, typer.Option(help="The upstream's base URL.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Variable holding the upstream's key.")
    ] = None,
    headers: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            "-H",
            help="An extra header for the upstream, 'Name: value' (repeatable); ${VARIABLE} "
            "in a value is read from the environment.",
        ),
    ] = None,
    read_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds the upstream may be silent in a call.")
    ] = 300.0,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = 0,
    record: Annotated[
        Path | None,
        typer.Option(
            help="Keep every call, its answer and its timing in this file (JSONL, no keys), "
            "to replay with a mock profile's replay: (as run --record)."
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="A JSON line per call on stdout as it ends, and the table."),
    ] = False,
) -> None:
    """Serve the recording proxy on 127.0.0.1 until stopped. Prints the base URL to give an
    OpenAI client (OPENAI_BASE_URL, it ends in /v1) on its first line, on stderr the
    variables that point an agent at it, and on exit the calls' timing table per model.

    Example: [bold]perfbench proxy --upstream openai/gpt-4o-mini --port 8800[/], then in
    another terminal the printed [bold]export …[/] and your agent.
    """
    import anyio

    from perfbench import host
    from perfbench.targets.target_spec import TargetSpec

    options = _Options(read_timeout, port, record, as_json)
    with errors():
        spec = TargetSpec("cmd:-", base_url=base_url, api_key_env=api_key_env,
                          headers=tuple(headers or ()), upstream=upstream)  # fmt: skip
        # uvloop where installed, as a measuring run: it relays a chunk for half the CPU.
        figures = anyio.run(
            _serve, spec, options, backend="asyncio", backend_options=host.loop_options()
        )
    _report(figures, as_json)


async def _serve(spec: TargetSpec, options: _Options) -> CallFigures:
    from perfbench.http import HttpClient
    from perfbench.proxy.server import ProxyServer
    from perfbench.task import Task

    figures = CallFigures()
    async with AsyncExitStack() as stack:
        where = await _upstream(spec, stack)
        http = HttpClient(0)
        stack.push_async_callback(http.aclose)
        recording = _recording(options.record, where, spec, stack)
        server = ProxyServer(where, http, options.read_timeout, recording)
        try:
            await server.start(options.port)
        except OSError as exc:
            raise PerfbenchError(
                f"the proxy cannot listen on 127.0.0.1:{options.port}: {exc.strerror or exc}"
                + (" (choose another --port, or 0 for any free one)" if options.port else "")
            ) from None
        stack.push_async_callback(server.aclose)
        task = Task(SESSION_CASE, "measured", 0, 0, 0, time.monotonic, time.monotonic())
        task.begin()
        route = server.routes.open(task)

        def counted(step: Step, model: str) -> None:  # a session keeps figures, not steps
            figures.add(step, model)
            if options.as_json:
                print(orjson.dumps(call_doc(step, model)).decode(), flush=True)
            if step in task.steps:
                task.steps.remove(step)

        route.on_call = counted
        _announce(server.base_url(route), route.token, where.name)
        await _until_stopped()
    return figures


def _recording(
    path: Path | None, where: Upstream, spec: TargetSpec, stack: AsyncExitStack
) -> Writer | None:
    if path is None:
        return None
    from perfbench.apis.recording import Writer

    name = where.name if where.name != "the embedded mock" else spec.upstream
    writer = Writer(path, {"suite": None, "suite_digest": None, "upstream": name}, where.secrets)
    stack.callback(writer.close)
    return writer


async def _upstream(spec: TargetSpec, stack: AsyncExitStack) -> Upstream:
    from perfbench.proxy import upstream
    from perfbench.targets.mock_http import MockHttp
    from perfbench.targets.registry import proxy_upstream

    if not spec.upstream.startswith("mock+http"):
        return proxy_upstream(spec)
    profile = spec.upstream.removeprefix("mock+http").lstrip(":") or "default"
    mock = await stack.enter_async_context(MockHttp(profile))
    assert mock.server_url is not None
    return upstream.mock(mock.server_url)


def _announce(base: str, token: str, upstream: str) -> None:
    # Alone on stdout's first line, scripts read it: what OPENAI_BASE_URL takes (the bare
    # route gave 404s to those who pasted it there).
    print(f"{base}/v1", flush=True)
    exports = (
        f"export OPENAI_BASE_URL={base}/v1 ANTHROPIC_BASE_URL={base} "
        f"OPENAI_API_KEY={token} ANTHROPIC_API_KEY={token}"
    )
    err.print(exports, markup=False, highlight=False, soft_wrap=True)
    err.print(f"perfbench proxy: forwarding to {upstream}; Ctrl-C stops.", markup=False)


async def _until_stopped() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


def _report(figures: CallFigures, as_json: bool) -> None:
    calls = figures.calls
    if as_json:
        doc = {"event": "summary", "calls": calls, "failed": figures.failed}
        print(orjson.dumps({**doc, "models": figures.to_dict()}).decode(), flush=True)
    elif calls:
        out.print(_table(figures.to_dict()))
    err.print(f"perfbench proxy: {calls} model call{'' if calls == 1 else 's'}, "
              f"{figures.failed} failed.")  # fmt: skip


def _table(models: dict[str, Any]) -> Table:
    table = Table(title="Model calls through the proxy (timings of the successful ones)")
    for name in ("model", "calls", "failed", "TTFT P50", "TTFT P95", "e2e P50", "e2e P95",
                 "e2e P99", "tok in", "tok out", "out/call"):  # fmt: skip
        table.add_column(name, justify="left" if name == "model" else "right")
    for model, m in models.items():
        ttft, e2e = m["ttft"] or {}, m["e2e"] or {}
        per_call = m["tokens_out_per_call"]
        table.add_row(
            model, str(m["calls"]), str(m["failed"]),
            seconds(ttft.get("p50")), seconds(ttft.get("p95")),
            seconds(e2e.get("p50")), seconds(e2e.get("p95")), seconds(e2e.get("p99")),
            str(m["tokens_in"]), str(m["tokens_out"]),
            "–" if per_call is None else f"{per_call:.1f}",
        )  # fmt: skip
    return table
