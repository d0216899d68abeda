"""``perfbench verify``: the figures perfbench relies on, checked against a target (tokens
counted vs reported, max_tokens, real streaming, usage in the stream, clock skew, prices)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import anyio
import orjson
import typer
from rich.table import Table

from perfbench.cli.app import ExitCode, app
from perfbench.cli.output import errors, out
from perfbench.errors import GateError, TargetError
from perfbench.stats.thresholds import quantity
from perfbench.verify import Bars, Check, Endpoint, verify


@app.command("verify")
def verify_command(
    target: Annotated[
        str,
        typer.Option("-t", "--target", help="mock+http[:profile][@model] or provider/model."),
    ] = "mock+http",
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="The server's OpenAI-compatible /v1 URL.")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="Environment variable with the key.")
    ] = None,
    tolerance: Annotated[
        str, typer.Option("--tolerance", help="Token counts may differ by this much.")
    ] = "5%",
    max_skew: Annotated[
        str, typer.Option("--max-skew", help="The server's clock may be this far off.")
    ] = "5s",
    prices: Annotated[
        Path | None, typer.Option("--prices", help="Price overrides file, as run takes it.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The checks as JSON on stdout.")] = False,
) -> None:
    """Check the figures perfbench relies on against a target, and exit 5 if one is past its
    bar: input tokens in the server's usage against its /tokenize (or the offline tokenizer
    when it is the model's own), the chat template's tokens per request, output tokens
    reported against max_tokens and against the count of the text, whether streaming is real
    or one burst, whether usage comes in the stream, the server's clock against this one
    (Date header), and the prices a run will use.

    Example: perfbench verify -t openai/meta-llama/Llama-3.1-8B-Instruct --base-url
    http://127.0.0.1:8000/v1
    """
    from perfbench.stats.cost import load_pricer

    with errors():
        bars = Bars(
            _share(tolerance, "--tolerance"), quantity(max_skew, "--max-skew")
        )  # usage errors before any request
        pricer = load_pricer(prices)
        checks = anyio.run(_checks, target, base_url, api_key_env, bars, pricer)
    failed = [c for c in checks if c.verdict == "fail"]
    if as_json:
        doc = {"target": target, "passed": not failed, "checks": [c.to_json() for c in checks]}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.print(_table(target, checks))
        out.print(
            "verify: failed: " + "; ".join(c.name for c in failed)
            if failed
            else "verify: every judged figure is within its bar",
            highlight=False,
        )
    if failed:
        raise typer.Exit(ExitCode.THRESHOLD)


def _share(text: str, what: str) -> float:
    value = quantity(text, what)
    if not 0 <= value < 1:
        raise GateError(f"{what} {text}: a share such as 5% or 0.05")
    return value


async def _checks(
    target: str, base_url: str | None, key_env: str | None, bars: Bars, pricer: object
) -> list[Check]:
    if target.startswith("mock+http"):
        return await _against_mock(target, bars, pricer)
    return await verify(_endpoint(target, base_url, key_env), bars, pricer)


async def _against_mock(target: str, bars: Bars, pricer: object) -> list[Check]:
    """The built-in mock server, started for the checks on a free loopback port."""
    from perfbench.mock.profile import load_profile
    from perfbench.mock.server import MockServer

    base, _, model = target.partition("@")
    profile = load_profile(base.partition(":")[2] or "default")
    server = MockServer(profile)
    url = await server.start()
    try:
        price_ref = profile.model(model or "mock")[1].prices_as
        return await verify(Endpoint(f"{url}/v1", model or "mock", {}, price_ref), bars, pricer)
    finally:
        await server.stop()


def _endpoint(target: str, base_url: str | None, key_env: str | None) -> Endpoint:
    from perfbench.http.urls import checked_url
    from perfbench.targets.target_spec import PROVIDERS

    provider_name, _, model = target.partition("/")
    provider = PROVIDERS.get(provider_name)
    if provider is None or not model or provider.api != "openai":
        known = ", ".join(n for n, p in PROVIDERS.items() if p.api == "openai")
        raise TargetError(
            f"verify -t {target}: give mock+http[:profile] or an OpenAI-compatible "
            f"provider/model ({known}; openai/MODEL --base-url URL for vLLM, SGLang, Ollama)"
        )
    url = checked_url(base_url, "--base-url") if base_url else provider.base_url
    key = os.environ.get(key_env or provider.key_env)
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return Endpoint(url, model, headers, target)


def _table(target: str, checks: list[Check]) -> Table:
    table = Table(title=f"perfbench verify: {target}", title_justify="left")
    for column in ("check", "measured", "expected", "verdict"):
        table.add_column(column)
    style = {"pass": "green", "fail": "bold red", "info": "dim"}
    for c in checks:
        table.add_row(c.name, c.measured, c.expected, f"[{style[c.verdict]}]{c.verdict}[/]")
    return table
