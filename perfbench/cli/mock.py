"""``perfbench mock serve`` and ``perfbench mock profiles``."""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from perfbench.cli.app import ExitCode, mock_app
from perfbench.cli.output import clean, err, error, errors, out, warning


@mock_app.command("serve")
def mock_serve(
    profile: Annotated[
        str, typer.Option(help="Profile name from `perfbench mock profiles`, or a YAML path.")
    ] = "default",
    host: Annotated[
        str,
        typer.Option(
            help="Address to bind: loopback by default. Any other (0.0.0.0 or :: for every "
            "interface, a LAN address) opens the mock, which has no authentication, to the "
            "network: it serves all the same, with a warning on stderr. For 0.0.0.0 or ::, the "
            "URL printed is the loopback one."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port; 0 picks a free one.")] = 0,
    seed: Annotated[int, typer.Option(help="Seed for every simulated draw.")] = 0,
    timings: Annotated[
        bool,
        typer.Option(
            help="Record when each keyed request arrived and its first token was written "
            "(GET URL/stats/timings), to separate the server's own lateness from a client's."
        ),
    ] = False,
    precise: Annotated[
        bool,
        typer.Option(
            help="Write each reply and token within microseconds of its due time, not up to "
            "1 ms late (timers count whole milliseconds), by busy-waiting the last 1.5 ms: "
            "costs the server a core under load. For measuring a client's own error."
        ),
    ] = False,
    until_stdin_closes: Annotated[
        bool,
        typer.Option(
            hidden=True,
            help="Stop when standard input closes: a parent that spawned the server holds it "
            "open, so the server ends with that parent, even one killed with SIGKILL.",
        ),
    ] = False,
) -> None:
    """Serve the mock until stopped (Ctrl-C). Prints the base URL on its first line.

    Point clients at it: OpenAI SDK [bold]base_url=URL/v1[/], Anthropic SDK [bold]base_url=URL[/].
    GET URL/stats counts requests, 429s and injected faults.
    """
    from perfbench.mock.profile import load_profile
    from perfbench.mock.server import MockServer, netloc, new_loop, stop_when_closed

    with errors():
        loaded = load_profile(profile)
    server = MockServer(loaded, seed=seed, host=host, port=port, timings=timings, precise=precise)
    loop = new_loop()
    try:
        url = loop.run_until_complete(server.start())
    except OSError as exc:
        error(f"cannot listen on {netloc(host, port)}: {exc}")
        raise typer.Exit(ExitCode.CONFIG) from None
    # The URL alone on stdout's first line, flushed: scripts and tests read it.
    print(url, flush=True)
    name = clean(loaded.name or profile)
    err.print(f"perfbench mock: profile {name}, seed {seed}; Ctrl-C stops.", markup=False)
    if server.exposed:
        warning(_exposed(server.exposed))
    if until_stdin_closes:
        stop_when_closed(loop, sys.stdin.fileno())
    # Ctrl-C stops the loop between callbacks. Python's own KeyboardInterrupt could be raised
    # inside one (a connection's eof_received, as a client hangs up), where uvloop reports it
    # as a transport's fatal error and swallows it: the server then served on, unstoppable.
    loop.add_signal_handler(signal.SIGINT, loop.stop)
    try:
        loop.run_forever()
    except KeyboardInterrupt:  # one that arrived before the handler was set
        pass
    finally:
        loop.run_until_complete(server.stop())
        loop.close()


def _exposed(addresses: list[str]) -> str:
    shown = ("every interface" if a in ("0.0.0.0", "::") else a for a in addresses)
    where = ", ".join(dict.fromkeys(shown))  # "" binds 0.0.0.0 and :: both
    return (
        f"the mock listens beyond loopback ({where}): anything that can reach this machine "
        "can use it, and it has no authentication. To keep it local: --host 127.0.0.1 (the "
        "default) or --host ::1."
    )


@mock_app.command("profiles")
def mock_profiles() -> None:
    """List the shipped mock profiles, one line each."""
    from perfbench.mock.profile import load_profile, shipped

    with errors():
        for name in shipped():
            out.print(f"[bold]{name:<14}[/] {load_profile(name).description}", highlight=False)
