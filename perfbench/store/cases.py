"""cases.jsonl: a many-case run's per-case figures, one line a case, beside its summary.json.

summary.json held every case's figures three times (a run's, pooled, across runs; ~36 KB of
text a case): 365 MB at 10^4 one-task cases, which `show` parsed into 1.1 GB and `compare`
into 1.8 GB, and 3.65 GB at 10^5, which nothing here could read (issue 38). A run of more than
``INLINE`` cases writes them here instead (summary.json's ``schema`` 2): a line is
``{"id", "runs": [figures or null, a run each], "pooled": figures}``, and the spreads across
runs are made again when read (``stats.summary.CaseSpreads``, as summary.json's writer makes
them). A reader keeps an offset a case and parses a line when a case is asked for, which is
how every reader takes cases (one at a time). summary.json of fewer cases, and of every run
written before, holds them itself (``schema`` 1) and reads as it always did.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from perfbench.errors import StoreError
from perfbench.store import checks

CASES = "cases.jsonl"
INLINE = 1_000  # summary.json holds up to this many cases itself
SCHEMA = 2  # summary.json's schema when its cases are in cases.jsonl
_FIX = "it is derived from samples.jsonl: delete it and summary.json, and perfbench recomputes both"
_ID = re.compile(rb'\{"id":("(?:[^"\\]|\\.)*")')  # a line's first key, as ``lines`` writes it


def many(summary: Mapping[str, Any]) -> bool:
    """Whether ``summary``'s cases go to cases.jsonl."""
    return len(summary["pooled"]["cases"]) > INLINE


def lines(summary: Mapping[str, Any]) -> Iterator[bytes]:
    """cases.jsonl's lines for ``summary`` (figures made a case at a time)."""
    runs = [run["cases"] for run in summary["runs"]]
    for case, pooled in summary["pooled"]["cases"].items():
        line = {
            "id": case,
            "runs": [r.get(case) for r in runs],
            "pooled": pooled,
        }
        yield orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def without_cases(summary: Mapping[str, Any]) -> dict[str, Any]:
    """summary.json's document when its cases are in cases.jsonl (``summary`` left as it is)."""

    def bare(scope: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in scope.items() if k != "cases"}

    return {
        **summary,
        "schema": SCHEMA,
        "runs": [bare(run) for run in summary["runs"]],
        "pooled": bare(summary["pooled"]),
        "across_runs": bare(summary["across_runs"]),
    }


def attach(summary: dict[str, Any], run_dir: Path) -> None:
    """Give a schema-2 ``summary`` read from ``run_dir`` its cases, read from cases.jsonl as
    they are asked for."""
    found = _Lines(run_dir / CASES)
    for i, run in enumerate(summary["runs"]):
        run["cases"] = _Figures(found, i)
    summary["pooled"]["cases"] = _Figures(found, None)
    summary["across_runs"]["cases"] = _Spreads(found)


class _Lines:
    """cases.jsonl's lines by case: an offset each, a line parsed (and checked) when read.
    The file is indexed when a case is first asked for: a reader of the run's figures alone
    (`history`, whose branch keeps meta.json and summary.json only) never needs it."""

    __slots__ = ("_checked_ids", "_found", "_last", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._found: dict[str, int] | None = None  # case -> offset, once indexed
        self._last: tuple[str, dict[str, Any]] | None = None  # ``items()`` reads each twice
        # A line is checked the first time it is read (~2 ms; parsing it ~50 µs): a reader
        # reads a case several times (the slowest, then its rows), and 10^5 ids are ~6 MB.
        self._checked_ids: set[str] = set()

    @property
    def _offsets(self) -> dict[str, int]:
        if self._found is None:
            self._found = self._index()
        return self._found

    def _index(self) -> dict[str, int]:
        offsets: dict[str, int] = {}
        try:
            with self.path.open("rb") as fh:
                offset = 0
                for number, line in enumerate(fh, 1):
                    offsets[self._id(line, number)] = offset
                    offset += len(line)
        except FileNotFoundError:
            what = "does not exist (summary.json's cases are there)"
            raise StoreError(f"{self.path} {what}; {_FIX}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror}") from exc
        return offsets

    def _id(self, line: bytes, number: int) -> str:
        """The line's case, from its first key as written; else the whole line parsed and
        checked, to say what is wrong with it."""
        found = _ID.match(line)
        if found is not None:
            with contextlib.suppress(orjson.JSONDecodeError):
                return str(orjson.loads(found.group(1)))
        return str(self._checked(line, number)["id"])

    def _checked(self, line: bytes, number: int) -> dict[str, Any]:
        try:
            return _parsed(line)
        except (orjson.JSONDecodeError, checks.Damage) as exc:
            raise self._damaged(number, exc) from None

    def _damaged(self, number: int, exc: Exception) -> StoreError:
        what = f"not valid JSON ({exc})" if isinstance(exc, orjson.JSONDecodeError) else exc
        return StoreError(f"{self.path}:{number}: {what}; {_FIX}")

    def ids(self) -> Iterator[str]:
        return iter(self._offsets)

    def __contains__(self, case: object) -> bool:
        return case in self._offsets

    def __len__(self) -> int:
        return len(self._offsets)

    def read(self, case: str) -> dict[str, Any]:
        if self._last is not None and self._last[0] == case:
            return self._last[1]
        offset = self._offsets[case]  # KeyError for a case not in the run, as a dict's
        try:  # opened for each line: a reader that drops the summary leaves no file open
            with self.path.open("rb") as fh:
                fh.seek(offset)
                line = fh.readline()
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror}") from exc
        try:
            doc: dict[str, Any] = orjson.loads(line)
            if case not in self._checked_ids:
                checks.check(doc, checks.CASE_LINE)
                self._checked_ids.add(case)
        except (orjson.JSONDecodeError, checks.Damage) as exc:
            raise self._damaged(list(self._offsets).index(case) + 1, exc) from None
        self._last = (case, doc)
        return doc


def _parsed(line: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(line)
    checks.check(doc, checks.CASE_LINE)
    return doc


class _Figures(Mapping[str, Any]):
    """Each case's figures in one scope (a run's, or pooled when ``run`` is None)."""

    __slots__ = ("_len", "_lines", "_run")

    def __init__(self, found: _Lines, run: int | None) -> None:
        self._lines, self._run = found, run
        self._len: int | None = None

    def _of(self, doc: dict[str, Any]) -> Any:
        if self._run is None:
            return doc["pooled"]
        runs = doc["runs"]
        return runs[self._run] if self._run < len(runs) else None

    def __getitem__(self, case: str) -> Any:
        figures = self._of(self._lines.read(case))
        if figures is None:
            raise KeyError(case)
        return figures

    def __contains__(self, case: object) -> bool:
        if not isinstance(case, str) or case not in self._lines:
            return False
        return self._run is None or self._of(self._lines.read(case)) is not None

    def __iter__(self) -> Iterator[str]:
        if self._run is None:
            return self._lines.ids()
        return (c for c in self._lines.ids() if self._of(self._lines.read(c)) is not None)

    def __len__(self) -> int:
        if self._len is None:
            self._len = len(self._lines) if self._run is None else sum(1 for _ in self)
        return self._len

    def __repr__(self) -> str:
        return f"cases of {self._lines.path} ({'pooled' if self._run is None else self._run})"


class _Spreads(Mapping[str, Any]):
    """Each case's spread across runs, made from its line's runs when read (as
    ``stats.summary.CaseSpreads`` makes it for summary.json), in CaseSpreads' order: sorted."""

    __slots__ = ("_lines",)

    def __init__(self, found: _Lines) -> None:
        self._lines = found

    def __getitem__(self, case: str) -> Any:
        from perfbench.stats.summary import CaseSpreads  # stats is not needed to write a run

        runs: list[Mapping[str, Any]] = [
            {case: f} for f in self._lines.read(case)["runs"] if f is not None
        ]
        return CaseSpreads(runs)[case]

    def __contains__(self, case: object) -> bool:
        return case in self._lines

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._lines.ids()))

    def __len__(self) -> int:
        return len(self._lines)
