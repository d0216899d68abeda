"""The one map from transport exceptions (aiohttp's and httpx's) to perfbench's error kinds.

Every HTTP path goes through ``mapped``: the asyncio client (its connections raise aiohttp's
exception types, as aiohttp's parser and stream reader do), the httpx client (tests under
trio and respx), and an HTTP agent's own httpx client. As httpx's ``map_httpcore_exceptions``
does, each exception maps to the most specific kind that fits; one that is not a transport
failure passes through untouched (a target bug is the runner's to report).

    connect_error        the connection could not be made (refused, DNS, connect timeout)
    timeout              no bytes for the read timeout
    connection_dropped   the connection broke before or while the body was read
    malformed_response   the body could not be decoded (a broken gzip stream)
    transport_error      any other transport failure
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import httpx

from perfbench.http.urls import public_url


class CallFailed(Exception):
    """A call (to a model or an agent) that failed in a classified way; the target turns it
    into a failed sample. It never leaves a target.

    ``kind`` is one of ``sample.ERROR_KINDS``; ``status`` the HTTP status, when there was one."""

    def __init__(self, kind: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.status = kind, message, status


_HTTPX_DROPPED = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.CloseError)


def classify(exc: BaseException, url: str) -> CallFailed | None:
    """The classified failure for a transport exception, or None when it is not one."""
    if isinstance(exc, httpx.RequestError):
        return _httpx(exc, url)
    aiohttp = sys.modules.get("aiohttp")  # only loaded when the aiohttp client is in use
    if aiohttp is not None:
        if isinstance(exc, aiohttp.ClientConnectorError):
            return CallFailed("connect_error", f"cannot connect to {public_url(url)}: {exc}")
        if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
            return CallFailed("timeout", f"{type(exc).__name__} from {public_url(url)}")
        if isinstance(exc, aiohttp.ClientError):  # dropped mid-body, reset, not HTTP at all…
            return CallFailed("connection_dropped", f"connection dropped: {_summary(exc)}")
    return None


def _summary(exc: BaseException) -> str:
    """What went wrong, from the exception's type and its own words, never its ``repr``:
    aiohttp's response errors carry the request (its headers: the key) in their repr, and
    their ``str`` the URL. A ``ClientResponseError`` (a bad status line, headers too large, a
    bad chunk) says it in ``message``; the text is cut, and the runner redacts it."""
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) else str(exc)
    return f"{type(exc).__name__}: {' '.join(text.split())[:_SUMMARY] or 'no detail'}"


_SUMMARY = 300


def _httpx(exc: httpx.RequestError, url: str) -> CallFailed:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return CallFailed("connect_error", f"cannot connect to {public_url(url)}: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return CallFailed("timeout", f"{type(exc).__name__} from {public_url(url)}")
    if isinstance(exc, _HTTPX_DROPPED):
        return CallFailed("connection_dropped", f"connection dropped: {_summary(exc)}")
    if isinstance(exc, httpx.DecodingError):  # e.g. a broken gzip body
        return CallFailed("malformed_response", _summary(exc))
    return CallFailed("transport_error", _summary(exc))


def reraise(exc: Exception, url: str) -> NoReturn:
    """Raise ``exc`` as the ``CallFailed`` it maps to, or as it is when it is not a transport
    failure (nor a ``CallFailed`` already)."""
    failed = None if isinstance(exc, CallFailed) else classify(exc, url)
    if failed is None:
        raise exc
    raise failed from exc


@contextmanager
def mapped(url: str) -> Iterator[None]:
    """Raise transport failures inside as ``CallFailed``; anything else as it is."""
    try:
        yield
    except Exception as exc:
        reraise(exc, url)
