"""HTTP scrape of one engine ``/metrics`` endpoint, bounded in time and size.

:func:`scrape` never raises for network problems: every failure becomes a :class:`ScrapeResult` with
``ok=False`` and one reason from :data:`advisor.conventions.SCRAPE_ERROR_REASONS`::

    reason               when
    ───────────────────  ───────────────────────────────────────────────────────────────────────────
    connection_refused   the connection could not be made or was lost: refused, DNS failure, reset,
                         TLS failure, a body cut short, an invalid URL (the closed vocabulary has no
                         finer reason; the message says which)
    timeout              connect timeout, no response headers within ``read_timeout``, a silent stall
                         longer than ``read_timeout`` mid-body, or the whole scrape passing its deadline
                         (``connect_timeout + read_timeout`` from the start, checked after every chunk,
                         so a server trickling bytes cannot hold a scrape open)
    http_status          a non-2xx status (also: too many redirects); the message has the code
    too_large            ``Content-Length`` or the decoded bytes read so far exceed ``max_bytes``
    parse_error          set by the caller with :func:`classify_parse_error` when the body does not
                         parse (see :func:`advisor.sources.exposition.parse_exposition`)

Worst case wall time: the deadline. Before each body read the socket's timeout is cut to what is left of
it, so a read that starts just before the deadline cannot block past it (best effort: where the socket is not
reachable, one more ``read_timeout``).

URLs often carry secrets (``https://user:token@host/metrics?key=…``). Neither ``target`` nor
``error_message`` ever contains the userinfo, query string or fragment: messages are composed here from
the redacted URL and the failure class, never from ``str(exception)`` (which quotes the request path
and query).
"""

from __future__ import annotations

import base64
import errno
import re
import time
from dataclasses import dataclass, replace
from urllib.parse import unquote, urlsplit

import requests
import urllib3.exceptions

from advisor.conventions import (
    REASON_CONNECTION_REFUSED,
    REASON_HTTP_STATUS,
    REASON_PARSE_ERROR,
    REASON_TIMEOUT,
    REASON_TOO_LARGE,
)
from advisor.errors import ParseError
from advisor.redact import redact_url

ACCEPT_HEADER = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
"""Ask for the classic text format (not OpenMetrics, not protobuf) from prometheus_client servers."""

_CHUNK_BYTES = 64 * 1024
_ERROR_BODY_BYTES = 1024
_ERROR_BODY_CHARS = 200


@dataclass(frozen=True)
class ScrapeResult:
    """The outcome of one scrape.

    Attributes:
        target: the scraped URL with userinfo, query and fragment removed (:func:`redact_url`).
        ok: true when a 2xx body was read completely within the limits.
        text: the body decoded as UTF-8 (undecodable bytes replaced) when ``ok``; else ``None``.
        error_reason: one of ``advisor.conventions.SCRAPE_ERROR_REASONS`` when not ``ok``; else ``None``.
        error_message: a short human-readable cause, free of URL secrets; ``None`` when ``ok``.
        duration_seconds: wall time of the scrape (monotonic clock), seconds.
        status_code: the HTTP status when a response arrived (also for too_large and body timeouts).
    """

    target: str
    ok: bool
    text: str | None
    error_reason: str | None
    error_message: str | None
    duration_seconds: float
    status_code: int | None


class _DeadlineExceededError(Exception):
    """The overall scrape deadline passed while the body was streaming."""


class _TooLargeError(Exception):
    """More than the allowed bytes arrived."""


def classify_parse_error(result: ScrapeResult, error: ParseError) -> ScrapeResult:
    """Turn a successful fetch whose body failed to parse into a ``parse_error`` result.

    The body is dropped (``text=None``); status and duration are kept. The message is the
    :class:`~advisor.errors.ParseError` text, which names the parser's complaint, not the URL.
    """
    return replace(
        result,
        ok=False,
        text=None,
        error_reason=REASON_PARSE_ERROR,
        error_message=str(error),
    )


def scrape(
    url: str,
    session: requests.Session,
    connect_timeout: float = 3.0,
    read_timeout: float = 10.0,
    max_bytes: int = 16 * 1024 * 1024,
) -> ScrapeResult:
    """GET ``url`` and return its body or a classified failure; never raises for network problems.

    Args:
        url: the ``/metrics`` URL; userinfo in it is sent as HTTP basic auth by ``requests``.
        session: a caller-owned ``requests.Session`` (connection reuse, TLS settings, proxies).
        connect_timeout: seconds to establish the TCP/TLS connection.
        read_timeout: seconds allowed for any single socket read (headers or a body chunk); with
            ``connect_timeout`` it also sets the overall deadline (see the module docstring).
        max_bytes: cap on the decoded body size, bytes (default 16 MiB; a busy vLLM with DP ranks
            exposes a few hundred KiB).

    Returns:
        A :class:`ScrapeResult`; ``ok`` with ``text`` on a complete 2xx body.
    """
    target = redact_url(url)
    start = time.monotonic()
    deadline = start + connect_timeout + read_timeout

    def fail(reason: str, message: str, status: int | None = None) -> ScrapeResult:
        return ScrapeResult(
            target=target,
            ok=False,
            text=None,
            error_reason=reason,
            error_message=message,
            duration_seconds=time.monotonic() - start,
            status_code=status,
        )

    try:
        response = session.get(
            url,
            stream=True,
            timeout=(connect_timeout, read_timeout),
            headers={"Accept": ACCEPT_HEADER},
        )
    except requests.exceptions.ConnectTimeout:
        return fail(REASON_TIMEOUT, f"connect timeout after {connect_timeout:g}s")
    except requests.exceptions.ReadTimeout:
        return fail(REASON_TIMEOUT, f"no response headers within read timeout {read_timeout:g}s")
    except requests.exceptions.TooManyRedirects:
        return fail(REASON_HTTP_STATUS, "too many redirects")
    except requests.exceptions.ConnectionError as exc:
        if _is_refused(exc):
            return fail(REASON_CONNECTION_REFUSED, "connection refused")
        return fail(REASON_CONNECTION_REFUSED, f"connection failed ({_cause_name(exc)})")
    except (requests.exceptions.RequestException, ValueError) as exc:
        return fail(REASON_CONNECTION_REFUSED, f"request failed ({_cause_name(exc)})")

    with response:
        status = response.status_code
        try:
            if not 200 <= status < 300:
                snippet = _error_snippet(response, deadline, url)
                message = f"HTTP {status} {response.reason or ''}".rstrip()
                return fail(REASON_HTTP_STATUS, f"{message}: {snippet}" if snippet else message, status)
            declared = _content_length(response)
            if declared is not None and declared > max_bytes:
                return fail(
                    REASON_TOO_LARGE,
                    f"Content-Length {declared} bytes exceeds the cap of {max_bytes} bytes",
                    status,
                )
            body = _read_body(response, deadline, max_bytes)
        except _TooLargeError:
            return fail(REASON_TOO_LARGE, f"body exceeds the cap of {max_bytes} bytes", status)
        except _DeadlineExceededError:
            return fail(
                REASON_TIMEOUT,
                f"body not complete within the deadline of {connect_timeout + read_timeout:g}s",
                status,
            )
        except urllib3.exceptions.ReadTimeoutError:
            if time.monotonic() >= deadline - 0.005:  # the read was cut at the deadline, not by a stall
                return fail(
                    REASON_TIMEOUT,
                    f"body not complete within the deadline of {connect_timeout + read_timeout:g}s",
                    status,
                )
            return fail(REASON_TIMEOUT, f"body read stalled longer than {read_timeout:g}s", status)
        except urllib3.exceptions.DecodeError:
            return fail(REASON_PARSE_ERROR, "body could not be decoded (Content-Encoding)", status)
        except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError) as exc:
            return fail(REASON_CONNECTION_REFUSED, f"connection lost while reading body ({_cause_name(exc)})", status)

    return ScrapeResult(
        target=target,
        ok=True,
        text=body.decode("utf-8", errors="replace"),
        error_reason=None,
        error_message=None,
        duration_seconds=time.monotonic() - start,
        status_code=status,
    )


def _read_body(response: requests.Response, deadline: float, max_bytes: int) -> bytes:
    """Read the decoded body chunk by chunk, checking the deadline and the cap after every chunk.

    ``read1`` returns as soon as any bytes are available, so a trickling server is caught by the
    deadline check instead of holding one blocking ``read(65536)`` open.
    """
    raw = response.raw
    parts: list[bytes] = []
    total = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _DeadlineExceededError
        _cap_socket_timeout(response, left)
        chunk = raw.read1(_CHUNK_BYTES, decode_content=True)
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise _TooLargeError
        parts.append(chunk)
    return b"".join(parts)


def _cap_socket_timeout(response: requests.Response, seconds: float) -> None:
    """Let the next socket read block at most ``seconds`` (never longer than the read timeout already set), so
    the deadline holds even for a read that starts just before it. Best effort: without a reachable socket
    the read timeout alone bounds the read."""
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    if sock is None:  # urllib3 2 detaches it once the headers are read: http.client's reader still holds it
        reader = getattr(getattr(response.raw, "_fp", None), "fp", None)
        sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if sock is None or not hasattr(sock, "settimeout"):
        return
    current = sock.gettimeout()
    sock.settimeout(max(0.001, seconds if current is None else min(current, seconds)))


def _error_snippet(response: requests.Response, deadline: float, url: str) -> str:
    """Up to 200 characters of an error body on one line, with the URL's secrets scrubbed; ``""`` if
    the body cannot be read quickly."""
    try:
        raw = response.raw
        data = b""
        while len(data) < _ERROR_BODY_BYTES and time.monotonic() <= deadline:
            chunk = raw.read1(_ERROR_BODY_BYTES - len(data), decode_content=True)
            if not chunk:
                break
            data += chunk
    except Exception:  # best effort only: the status code is the error
        return ""
    text = " ".join(data.decode("utf-8", errors="replace").split())
    text = _scrub(text, url)
    if len(text) > _ERROR_BODY_CHARS:
        text = text[: _ERROR_BODY_CHARS - 1] + "…"
    return text


_AUTH_HEADER_RE = re.compile(r"\b(Basic|Bearer)\s+[A-Za-z0-9._~+/=-]{8,}")


def _scrub(text: str, url: str) -> str:
    """Replace the URL's userinfo, password and query string in ``text`` with ``[REDACTED]``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return text
    secrets = [parts.query, parts.fragment, parts.password or ""]
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        secrets.append(userinfo)
        # a body that echoes the request headers carries the credentials base64-encoded (Basic auth)
        decoded = unquote(userinfo)
        secrets.append(base64.b64encode(decoded.encode()).decode())
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "[REDACTED]")
    return _AUTH_HEADER_RE.sub(r"\1 [REDACTED]", text)


def _content_length(response: requests.Response) -> int | None:
    value = response.headers.get("Content-Length")
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _is_refused(exc: BaseException) -> bool:
    """Whether the exception chain holds a refused connection (``ECONNREFUSED``)."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return True
        stack.extend(
            x
            for x in (e.__cause__, e.__context__, getattr(e, "reason", None))
            if x is not None and isinstance(x, BaseException)
        )
        stack.extend(a for a in e.args if isinstance(a, BaseException))
    return False


def _cause_name(exc: BaseException) -> str:
    """The innermost exception class name in the chain (``NameResolutionError``, ``SSLError`` …)."""
    name = type(exc).__name__
    e: BaseException | None = exc
    for _ in range(10):
        nxt = getattr(e, "reason", None)
        if not isinstance(nxt, BaseException):
            nxt = e.__cause__ if e is not None else None
        if not isinstance(nxt, BaseException):
            args = [a for a in (e.args if e is not None else ()) if isinstance(a, BaseException)]
            nxt = args[0] if args else None
        if nxt is None:
            break
        name = type(nxt).__name__
        e = nxt
    return name
