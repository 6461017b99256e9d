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
                         (``connect_timeout + read_timeout`` from the start, over the whole request: status
                         line and headers included, so a server trickling bytes cannot hold a scrape open)
    http_status          a non-2xx status (also: too many redirects); the message has the code
    too_large            ``Content-Length`` or the decoded bytes read so far exceed ``max_bytes``
    sample_limit         the 2xx body holds more than ``sample_limit`` samples (counted on the bytes before they
                         are decoded or parsed: :mod:`advisor.sources.limits`); a series over ``label_limit`` is
                         the same reason, set by :func:`advisor.observe.observe` on the parsed samples
    parse_error          set by the caller with :func:`classify_parse_error` when the body does not
                         parse (see :func:`advisor.sources.exposition.parse_exposition`)

Worst case wall time: the deadline. Every socket read (status line, headers, body) is cut to what is left of
it (:class:`advisor.http_edge.PooledTransport`, :class:`advisor.http_edge.DeadlineAdapter` under ``requests``), so a
read that starts just before the deadline cannot block past it.

URLs often carry secrets (``https://user:token@host/metrics?key=…``). Neither ``target`` nor
``error_message`` ever contains the userinfo, query string or fragment: messages are composed here from
the redacted URL and the failure class, never from ``str(exception)`` (which quotes the request path
and query).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import requests

from advisor.conventions import REASON_HTTP_STATUS, REASON_PARSE_ERROR, REASON_SAMPLE_LIMIT
from advisor.errors import ParseError
from advisor.http_edge import EdgeError, EdgeLimits, EdgeResponse, RequestsTransport, Transport
from advisor.redact import OUTSIDE_TEXT_CHARS, outside_text, redact_url, url_secrets
from advisor.sources.limits import DEFAULT_SAMPLE_LIMIT, check_page

ACCEPT_HEADER = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
"""Ask for the classic text format (not OpenMetrics, not protobuf) from prometheus_client servers."""

ERROR_BODY_BYTES = 1024
"""Bytes of a non-2xx body read for the error message (decoded)."""
_ERROR_BODY_CHARS = 200
_MESSAGE_CHARS = 2 * OUTSIDE_TEXT_CHARS
"""Bound on a whole error message (cause + quoted body), characters."""


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


def classify_parse_error(result: ScrapeResult, error: ParseError) -> ScrapeResult:
    """Turn a successful fetch whose body failed to parse into a ``parse_error`` result.

    The body is dropped (``text=None``); status and duration are kept. The message is the
    :class:`~advisor.errors.ParseError` text, which names the parser's complaint, not the URL; it may quote the
    body, so it goes through :func:`advisor.redact.outside_text` (secrets scrubbed, control characters escaped,
    bounded).
    """
    return replace(
        result,
        ok=False,
        text=None,
        error_reason=REASON_PARSE_ERROR,
        error_message=outside_text(str(error), limit=_MESSAGE_CHARS),
    )


def scrape(
    url: str,
    session: requests.Session | Transport,
    connect_timeout: float = 3.0,
    read_timeout: float = 10.0,
    max_bytes: int = 16 * 1024 * 1024,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
) -> ScrapeResult:
    """GET ``url`` and return its body or a classified failure; never raises for network problems.

    The request goes through the HTTP edge (:mod:`advisor.http_edge`): one deadline over the whole request,
    one byte cap, one redaction, one set of error classes.

    Args:
        url: the ``/metrics`` URL; userinfo in it is sent as HTTP basic auth (percent-decoded; netrc credentials
            for the host take precedence).
        session: any :class:`~advisor.http_edge.Transport` — the daemon's is
            :func:`~advisor.http_edge.target_transport` (a pooled keep-alive connection per target) — or a
            caller-owned ``requests.Session`` (a :class:`~advisor.http_edge.DeadlineAdapter` is mounted on it).
        connect_timeout: seconds to establish the TCP/TLS connection.
        read_timeout: seconds allowed for any single socket read (headers or a body chunk); with
            ``connect_timeout`` it also sets the overall deadline (see the module docstring).
        max_bytes: cap on the decoded body size, bytes (default 16 MiB; a busy vLLM with DP ranks
            exposes a few hundred KiB).
        sample_limit: samples (lines not starting with ``#``) the page may hold, ``0`` = no limit; a page over it
            is a ``sample_limit`` failure, counted on the bytes without decoding or parsing them and stopped as
            soon as the count passes the limit (:func:`advisor.sources.limits.check_page`).

    Returns:
        A :class:`ScrapeResult`; ``ok`` with ``text`` on a complete 2xx body.
    """
    start = time.monotonic()
    transport = RequestsTransport(session) if isinstance(session, requests.Session) else session
    limits = EdgeLimits(connect_timeout, read_timeout, max_bytes)
    answer: EdgeResponse | EdgeError
    try:
        answer = transport.request(
            "GET", url, limits, headers={"Accept": ACCEPT_HEADER}, error_body_bytes=ERROR_BODY_BYTES
        )
    except EdgeError as exc:
        answer = exc
    return scrape_outcome(url, start, answer, sample_limit)


def scrape_outcome(url: str, start: float, answer: EdgeResponse | EdgeError, sample_limit: int) -> ScrapeResult:
    """The :class:`ScrapeResult` of a GET of ``url`` begun at ``start`` (a :func:`time.monotonic` value) that
    produced ``answer`` (the transport's response, or the :class:`~advisor.http_edge.EdgeError` it raised): the
    status, sample-limit and decoding steps of :func:`scrape`, shared with :mod:`advisor.scrape_loop`, which sends
    the request itself (the request: ``GET`` with ``Accept:`` :data:`ACCEPT_HEADER`, at most
    :data:`ERROR_BODY_BYTES` of a non-2xx body read)."""
    target = redact_url(url)

    def fail(reason: str, message: str, status: int | None = None) -> ScrapeResult:
        return ScrapeResult(
            target=target,
            ok=False,
            text=None,
            error_reason=reason,
            error_message=outside_text(message, url_secrets(url), limit=_MESSAGE_CHARS),
            duration_seconds=time.monotonic() - start,
            status_code=status,
        )

    if isinstance(answer, EdgeError):
        return fail(answer.reason, answer.message, answer.status)
    if not 200 <= answer.status < 300:
        snippet = _error_snippet(answer.body, url)
        message = f"HTTP {answer.status} {answer.reason}".rstrip()
        return fail(REASON_HTTP_STATUS, f"{message}: {snippet}" if snippet else message, answer.status)
    over = check_page(answer.body, sample_limit)
    if over is not None:
        return fail(REASON_SAMPLE_LIMIT, over, answer.status)
    return ScrapeResult(
        target=target,
        ok=True,
        text=answer.body.decode("utf-8", errors="replace"),
        error_reason=None,
        error_message=None,
        duration_seconds=time.monotonic() - start,
        status_code=answer.status,
    )


def _error_snippet(body: bytes, url: str) -> str:
    """Up to 200 characters of an error body on one line, with the URL's secrets and any credential scrubbed and
    control characters escaped (:func:`advisor.redact.outside_text`)."""
    return outside_text(" ".join(body.decode("utf-8", errors="replace").split()), url_secrets(url), _ERROR_BODY_CHARS)
