"""A finished sweep's report files: sweep.md and the chart (sweep.png, sweep.svg) in its
directory, rendered from the result the engine returns (``sweep_md``, ``charts``). The edge of
the sweep's presentation, as ``release`` is a report folder's: the renderers stay pure."""

from __future__ import annotations

from pathlib import Path

from perfbench.errors import StoreError
from perfbench.report.sweep_md import Swept, knee_label, render


def write(result: Swept) -> list[Path]:
    """Write sweep.md and, when a level was measured, the chart; return the files written.
    ``engine.sweep.Sweep`` calls it (as its ``publish``) before the sweep is marked completed,
    so a failed write leaves a sweep that ``perfbench sweep --resume`` writes again."""
    path = result.path
    try:
        written = [path / "sweep.md"]
        written[0].write_text(render(result), encoding="utf-8")
        if result.levels:
            from perfbench.report.charts import sweep_chart  # matplotlib loads only here

            unit = "tasks/s" if result.plan.rates else "concurrency"
            knee = result.findings["knee"]
            label = knee_label(result.findings)
            written += sweep_chart(result.levels, knee, path / "sweep", unit, knee_label=label)
    except OSError as exc:
        raise StoreError(
            f"cannot write the sweep's findings in {path}: {exc.strerror or exc}. The "
            f"levels are kept: fix the cause, then `perfbench sweep --resume {path}`"
        ) from exc
    return written
