"""Whether two runs may be compared, and what to say when their conditions differ (pure).

Runs of different suites are refused (their figures are not comparable) unless forced; a
different host, target, load or perfbench version is a note beside the verdict, since each
can move the figures as much as the release did."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from perfbench.errors import GateError


def run_notes(meta: Mapping[str, Any], side: str) -> Iterator[str]:
    if meta.get("status") != "completed":
        yield (
            f"the {side} run {meta['id']} did not complete ({meta.get('status')}): its summary "
            f"covers only what was measured; finish it with `perfbench run --resume`"
        )


def pair_notes(base: Mapping[str, Any], cand: Mapping[str, Any], force: bool) -> list[str]:
    """Refuse runs of different suites unless forced; warn where the runs' conditions differ."""
    notes = []
    digests = base["suite"].get("digest"), cand["suite"].get("digest")
    if digests[0] != digests[1]:
        if not force:
            raise GateError(
                f"the runs measured different suites (digest {str(digests[0])[:12]} vs "
                f"{str(digests[1])[:12]}): their figures are not comparable; use --force to "
                "compare anyway"
            )
        notes.append("the runs measured different suites (compared with --force)")
    if base.get("host") != cand.get("host"):
        notes.append(
            "the runs were made on different hosts: latency differences may be the machine's; "
            "run baseline and candidate on the same runner"
        )
    if base["id"] == cand["id"]:
        notes.append("baseline and candidate are the same run")
    if base.get("target") != cand.get("target"):
        notes.append(
            f"the runs measured different targets ({base.get('target')} vs {cand.get('target')})"
        )
    if base.get("load") != cand.get("load"):
        notes.append(
            f"the runs had different loads ({load_text(base)} vs {load_text(cand)}): "
            "throughput and latency depend on the load as much as on the release"
        )
    if base.get("perfbench_version") != cand.get("perfbench_version"):
        notes.append(
            f"perfbench versions differ ({base.get('perfbench_version')} vs "
            f"{cand.get('perfbench_version')})"
        )
    return notes


def stamp_notes(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[str]:
    """A note when the runs' scenario stamps (run --scenario) differ: a VALID run against an
    INVALID one, or a stamped run against an unstamped one."""
    stamps = base.get("scenario"), cand.get("scenario")
    words = [_stamp_word(s) for s in stamps]
    if words[0] == words[1]:
        return []
    failed = [
        f"the {side}'s: " + ", ".join(r["rule"] for r in s["rules"] if not r["ok"])
        for side, s in zip(("baseline", "candidate"), stamps, strict=True)
        if s and not s["valid"]
    ]
    return [
        f"the baseline is {words[0]} and the candidate {words[1]}: a comparison of runs the "
        "scenario's rules judge differently"
        + (f" (failed rules, {'; '.join(failed)})" if failed else "")
    ]


def _stamp_word(stamp: Mapping[str, Any] | None) -> str:
    if not stamp:
        return "not stamped (no --scenario)"
    return f"{stamp['name']} {'VALID' if stamp['valid'] else 'INVALID'}"


def load_text(meta: Mapping[str, Any]) -> str:
    load = meta.get("load") or {}
    details = ", ".join(f"{k} {v}" for k, v in load.items() if k != "shape" and v is not None)
    return f"{load.get('shape', '?')}" + (f": {details}" if details else "")
