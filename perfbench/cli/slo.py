"""``perfbench slo list``: the named objectives ``--slo`` takes, with their sources."""

from __future__ import annotations

from typing import Annotated

import typer

from perfbench.cli.app import slo_app
from perfbench.cli.output import errors, out


@slo_app.command("list")
def slo_list(
    urls: Annotated[
        bool, typer.Option("--urls/--no-urls", help="Print each preset's source address.")
    ] = True,
) -> None:
    """List the presets for --slo NAME: their objectives, percentile, and where each number
    was read (MLPerf Inference's LoadGen mlperf.conf, GuideLLM's SLO guide).

    Example: perfbench run cases/ -t openai+http://127.0.0.1:8000/v1 --slo
    mlperf:llama2-70b:interactive
    """
    from perfbench.stats import presets

    with errors():
        known = presets.presets()
    for preset in known.values():
        out.print(f"[bold]{preset.name}[/]: {preset.text}", highlight=False)
        out.print(f"  {preset.source}: {preset.cite}", highlight=False, soft_wrap=True)
        if urls:
            out.print(f"  {preset.url}", highlight=False, soft_wrap=True)
