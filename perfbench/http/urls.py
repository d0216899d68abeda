"""URLs as perfbench takes them from the user and as it records them.

A URL given on the command line may carry credentials (``http://user:pw@host``) or a key in its
query string; what a run records or prints is ``public_url`` of it. ``checked_url`` says at
once what is wrong with a URL that would otherwise fail every task alike."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from perfbench.errors import TargetError


def public_url(url: str) -> str:
    """``url`` without credentials, query string or fragment: safe to store in a run."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


PREFLIGHT_S = 10.0  # how long the pre-flight connection may take
_CREDENTIAL_QUERY = re.compile(r"key|token|secret|password|sig|auth", re.IGNORECASE)
MASKED = "***"


def recorded_url(url: str) -> str:
    """``url`` as a run may record it and a resume reuse it: no ``user:pw@``, and the values
    of credential-like query parameters (``key=``, ``token=``, ``sig=``) masked; the rest of
    the query (``api-version=``) kept."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, MASKED if _CREDENTIAL_QUERY.search(k) else v) for k, v in pairs], safe="*"
        )
    return urlunsplit(parts._replace(netloc=host, query=query))


async def reachable(url: str, timeout_s: float = PREFLIGHT_S) -> None:
    """The pre-flight check of a run: a TCP connection to ``url``'s host and port, made and
    closed before the first task (no request: nothing spent, nothing an agent acts on). A
    target that is down fails the run at once (a TargetError saying what to check), not as a
    run of failed tasks that exits 0."""
    import anyio

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    try:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(host, port)
    except (OSError, TimeoutError) as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise TargetError(
            f"pre-flight: cannot connect to {public_url(url)} ({why} within {timeout_s:g} s). "
            "Is the server up, and is the URL right? (--no-preflight skips this check)"
        ) from exc
    await stream.aclose()


def checked_url(url: str, what: str) -> str:
    """``url`` when it is an http(s) URL with a host and a valid port; else a TargetError
    naming ``what`` (``--base-url``, ``agent URL``) and the fix."""
    shown = public_url(url)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"{what} '{shown}': expected http://host[:port]/path or https://…")
    try:
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise TargetError(f"{what} '{shown}': {exc}") from exc
    if port == 0:
        raise TargetError(f"{what} '{shown}': port 0 is not a port to connect to")
    return url
