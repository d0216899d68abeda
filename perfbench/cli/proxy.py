"""``perfbench proxy``: the recording proxy on its own, for an agent you start yourself (or a
benchmark of the proxy's overhead). One route for the whole session; Ctrl-C or SIGTERM stops
it and says how many calls went through."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Annotated

import typer

from perfbench.cli.app import app
from perfbench.cli.output import err, errors
from perfbench.errors import PerfbenchError
from perfbench.suite import Case

if TYPE_CHECKING:
    from perfbench.proxy.upstream import Upstream
    from perfbench.sample import Step
    from perfbench.targets.registry import TargetSpec

# The session's calls are steps of one long task; its timeout is not the calls' (--read-timeout).
SESSION_CASE = Case(id="proxy", language="en", input="-", timeout_s=3600)


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
) -> None:
    """Serve the recording proxy on 127.0.0.1 until stopped. Prints the route's base URL on
    its first line, and on stderr the variables that point an agent at it.

    Example: [bold]perfbench proxy --upstream openai/gpt-4o-mini[/], then in another
    terminal the printed [bold]export …[/] and your agent.
    """
    import anyio

    from perfbench import host
    from perfbench.targets.registry import TargetSpec

    with errors():
        spec = TargetSpec("cmd:-", base_url=base_url, api_key_env=api_key_env,
                          headers=tuple(headers or ()), upstream=upstream)  # fmt: skip
        # uvloop where installed, as a measuring run: it relays a chunk for half the CPU.
        options = host.loop_options()
        counts = anyio.run(_serve, spec, read_timeout, backend="asyncio", backend_options=options)
    calls = counts.total()
    err.print(f"perfbench proxy: {calls} model call{'' if calls == 1 else 's'}, "
              f"{counts['failed']} failed.")  # fmt: skip


async def _serve(spec: TargetSpec, read_timeout: float) -> Counter[str]:
    from perfbench.http import HttpClient
    from perfbench.proxy.server import ProxyServer
    from perfbench.task import Task

    counts: Counter[str] = Counter()
    async with AsyncExitStack() as stack:
        where = await _upstream(spec, stack)
        http = HttpClient(0)
        stack.push_async_callback(http.aclose)
        server = ProxyServer(where, http, read_timeout)
        try:
            await server.start()
        except OSError as exc:
            raise PerfbenchError(f"the proxy cannot listen on 127.0.0.1: {exc}") from None
        stack.push_async_callback(server.aclose)
        task = Task(SESSION_CASE, "measured", 0, 0, 0, time.monotonic, time.monotonic())
        task.begin()
        route = server.routes.open(task)

        def counted(step: Step) -> None:  # a session keeps counts, not a million steps
            counts["ok" if step.status == "ok" else "failed"] += 1
            if step in task.steps:
                task.steps.remove(step)

        route.on_call = counted
        _announce(server.base_url(route), route.token, where.name)
        await _until_stopped()
    return counts


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
    print(base, flush=True)  # alone on stdout's first line: scripts read it
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
