"""Recordings: every model call a ``cmd:`` agent made through the proxy, its answer and its
timing, to be served again by the mock (a profile's ``replay:``), so a CI gate runs on real
model behaviour with no key and no cost.

A recording is a JSONL file. Its first line says what it is::

    {"perfbench_recording": 1, "suite": "support", "suite_digest": "…", "upstream": "openai/…"}

then one line per call, in the order the calls ended::

    {"case": "refund", "phase": "measured", "run": 0, "iteration": 0, "step": 1,
     "path": "chat/completions", "model": "gpt-4o-mini", "status": 200,
     "headers": {"content-type": "text/event-stream"}, "chunks": [[0.412, "data: …"], …]}

``step`` is the call's number in its task (from 0); ``chunks`` are the answer's pieces as
they arrived, each with its arrival in seconds after the request went upstream (the first
one's is the upstream TTFT, for a stream). Nothing of a request is kept but its path and
model, and the answer's text passes the one redaction rule (``http/redact``) with the
upstream's key and every credential-like environment value: a recording holds no key."""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from perfbench.errors import PerfbenchError
from perfbench.http.redact import Redactor, environment_secrets

FORMAT = 1
KEPT_HEADERS = ("content-type", "retry-after")


class RecordingError(PerfbenchError):
    """A recording that cannot be read or written; the message names the file (and line)."""


@dataclass(frozen=True)
class Call:
    """One recorded call, as a line of the file."""

    case: str
    phase: str
    run: int
    iteration: int
    step: int
    path: str
    model: str
    status: int
    headers: dict[str, str]
    chunks: tuple[tuple[float, str], ...]

    @property
    def body(self) -> bytes:
        return "".join(text for _, text in self.chunks).encode()


class Writer:
    """Appends calls to a recording, one flushed line each (a killed run keeps what it had)."""

    def __init__(self, path: Path, header: Mapping[str, Any], secrets: Iterable[str]) -> None:
        self.path = path
        self._redact = Redactor({*secrets, *environment_secrets()})
        try:
            self._fh: IO[bytes] = path.open("wb")
        except OSError as exc:
            raise RecordingError(f"{path}: cannot write the recording: {exc.strerror}") from None
        self._line({"perfbench_recording": FORMAT, **header})

    def write(self, call: Call) -> None:
        doc = {
            "case": call.case, "phase": call.phase, "run": call.run,
            "iteration": call.iteration, "step": call.step, "path": call.path,
            "model": self._redact(call.model), "status": call.status,
            "headers": {k: self._redact(v) for k, v in call.headers.items()},
            "chunks": [list(c) for c in _redacted(call.chunks, self._redact)],
        }  # fmt: skip
        self._line(doc)

    def _line(self, doc: Mapping[str, Any]) -> None:
        self._fh.write(orjson.dumps(doc) + b"\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def texts(chunks: Iterable[tuple[float, bytes]]) -> tuple[tuple[float, str], ...]:
    """Byte chunks as text chunks: a character cut between two chunks is kept whole in the
    first one it ends in, so the texts joined are the body decoded."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = [(at, decoder.decode(data)) for at, data in chunks]
    rest = decoder.decode(b"", final=True)
    if rest and out:
        out[-1] = (out[-1][0], out[-1][1] + rest)
    return tuple(out)


def _redacted(
    chunks: tuple[tuple[float, str], ...], redact: Redactor
) -> tuple[tuple[float, str], ...]:
    """The chunks with every secret masked, also one that straddles two chunks: the whole
    text is redacted, and only when that changed it are the chunks cut again from it, at
    the same share of its length (the timing stays; the cut points move a little)."""
    whole = "".join(text for _, text in chunks)
    masked = redact(whole)
    if masked == whole or not whole:
        return chunks
    out, start, seen = [], 0, 0
    for at, text in chunks:
        seen += len(text)
        end = round(seen * len(masked) / len(whole))
        out.append((at, masked[start:end]))
        start = end
    return tuple(out)


def read(path: Path) -> tuple[dict[str, Any], list[Call]]:
    """A recording's header and calls; a damaged line is a RecordingError naming it."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read the recording: {exc.strerror}") from None
    if not lines:
        raise RecordingError(f"{path}: empty, not a perfbench recording")
    header = _doc(lines[0], path, 1)
    if header.get("perfbench_recording") != FORMAT:
        raise RecordingError(f"{path}:1: not a perfbench recording (format {FORMAT})")
    calls = [_call(_doc(line, path, n), path, n) for n, line in enumerate(lines[1:], 2) if line]
    return header, calls


def _doc(line: bytes, path: Path, number: int) -> dict[str, Any]:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise RecordingError(f"{path}:{number}: not JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise RecordingError(f"{path}:{number}: expected an object")
    return doc


def _call(doc: dict[str, Any], path: Path, number: int) -> Call:
    try:
        chunks = tuple((float(at), str(text)) for at, text in doc["chunks"])
        return Call(
            str(doc["case"]), str(doc["phase"]), int(doc["run"]), int(doc["iteration"]),
            int(doc["step"]), str(doc["path"]), str(doc["model"]), int(doc["status"]),
            {str(k): str(v) for k, v in doc["headers"].items()}, chunks,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordingError(f"{path}:{number}: not a recorded call ({exc!r})") from None
