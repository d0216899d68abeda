"""The calibration cache: ``perfbench calibrate``'s figures for this machine, one file.

Stored in ``$PERFBENCH_CALIBRATION`` or ``~/.cache/perfbench/calibration.json`` (under
``$XDG_CACHE_HOME`` when set), keyed by the host's fingerprint: another machine's ceiling says
nothing about this one, so figures measured elsewhere read as absent."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfbench import host
from perfbench.errors import StoreError
from perfbench.store.files import read_json, write_json
from perfbench.version import __version__


def path() -> Path:
    explicit = os.environ.get("PERFBENCH_CALIBRATION")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "perfbench" / "calibration.json"


def load() -> dict[str, Any]:
    """Stored calibrations by path (``http``, ``in-process``), for this machine only; empty
    when there are none."""
    try:
        doc: dict[str, Any] = read_json(path())
    except (StoreError, FileNotFoundError, ValueError):
        return {}
    if doc.get("host") != _host_key():
        return {}
    return dict(doc.get("paths") or {})


def save(path_kind: str, figures: Mapping[str, Any]) -> Path:
    target = path()
    doc: dict[str, Any] = {"host": _host_key(), "paths": load()}
    doc["paths"][path_kind] = {
        **figures,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "perfbench_version": __version__,
    }
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {target.parent}: {exc.strerror}") from exc
    write_json(target, doc)
    return target


def _host_key() -> dict[str, Any]:
    return {**host.fingerprint(), "node": platform.node()}
