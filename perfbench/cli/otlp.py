"""``--otlp URL`` (run, export) and ``export --format otlp-json``: a run's tasks as
OpenTelemetry traces and metrics (perfbench/otel.py), sent or written after the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

from perfbench import store
from perfbench.cli.output import err
from perfbench.errors import StoreError

if TYPE_CHECKING:
    from perfbench.export import Run

OTLP_JSON = "otlp-json"
OtlpOpt = Annotated[
    str | None,
    typer.Option(
        "--otlp",
        metavar="URL",
        help="Send the run's tasks as OpenTelemetry GenAI spans (invoke_agent → chat, "
        "execute_tool) and metrics to this OTLP/HTTP endpoint (http://localhost:4318) once "
        "the run ends. Needs the otel extra.",
    ),
]


def check(url: str | None) -> None:
    """Before a run: the URL is an http(s) address and the extra is installed, so a
    mistake is found before minutes of measuring, not after."""
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise typer.BadParameter(
            f"--otlp takes an OTLP/HTTP address such as http://localhost:4318, not {url!r}"
        )
    import perfbench.otel  # noqa: F401  (raises with the install hint when the extra is missing)


def export_format(fmt: str | None, url: str | None, formats: tuple[str, ...]) -> str | None:
    """``export --format``: csv unless only ``--otlp`` was asked for (then None: no file)."""
    if fmt is None:
        return None if url is not None else "csv"
    if fmt not in (*formats, OTLP_JSON):
        raise typer.BadParameter(f"--format is one of {', '.join(formats)}, {OTLP_JSON}")
    return fmt


def export(run: Run, fmt: str | None, out: Path | None, phase: str, url: str | None) -> Path | None:
    """``perfbench export``: send to ``url`` if given, then write ``fmt`` (None: nothing)."""
    from perfbench import export as tables

    if url is not None:
        send(run.path, run.meta, url, phase)
    if fmt is None:
        return None
    if fmt == OTLP_JSON:
        return write(run.path, run.meta, out, phase)
    return tables.export(run, fmt, out, phase)  # type: ignore[arg-type]


def send(run_dir: Path, meta: dict[str, Any], url: str, phase: str = "measured") -> None:
    from perfbench import otel

    sent = otel.send(run_dir, meta, url, phase)
    err.print(
        f"OpenTelemetry: {sent.tasks} task(s), {sent.spans} spans and the run's metrics "
        f"sent to {url}",
        highlight=False,
        markup=False,
        soft_wrap=True,  # the URL whole, for a reader to copy
    )


def write(run_dir: Path, meta: dict[str, Any], out: Path | None, phase: str) -> Path:
    from perfbench import otel

    stem = "otlp" if phase == "measured" else f"otlp-{phase}"
    path = out if out is not None else run_dir / f"{stem}.jsonl"
    own = {(run_dir / name).resolve() for name in store.OWN_FILES}
    if path.resolve() in own:
        raise StoreError(f"{path} is one of the run's own files; choose another --out")
    otel.write_json(run_dir, meta, path, phase)
    return path
