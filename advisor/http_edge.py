"""One HTTP edge policy for every outbound request: scraping, the Prometheus client and the notifiers.

The policy, in one place:

* **One deadline over the whole request** — ``connect_timeout + read_timeout`` from the start. It holds for the
  connection, the TLS handshake, the status line and headers, and every body read: each ``recv`` on the
  socket is cut to what is left of the deadline (:class:`DeadlineAdapter`). ``requests``' own read timeout is
  per ``recv`` only, so a server trickling its headers one byte a second would otherwise hold a request open
  for as long as it likes.
* **One byte cap** on the decoded body (:func:`read_capped`), checked after every chunk.
* **One redaction**: messages are composed from the failure class and :func:`advisor.redact.redact_url`,
  never from ``str(exception)``; bodies quoted in errors go through :func:`advisor.redact.scrub` (one
  placeholder, :data:`advisor.redact.REDACTED`).
* **Error classes** — every failure is an :class:`EdgeError` whose ``reason`` is one of
  :data:`advisor.conventions.SCRAPE_ERROR_REASONS`::

      EdgeError                     reason
      ├── EdgeTimeoutError               timeout             connect timeout, a stall, the deadline
      ├── EdgeConnectionError       connection_refused  refused, DNS, TLS, reset, cut short, invalid URL
      ├── EdgeHTTPStatusError            http_status         too many redirects
      ├── EdgeTooLargeError              too_large           Content-Length or decoded bytes over the cap
      └── EdgeDecodeError           parse_error         Content-Encoding that does not decode

Transports are pluggable (:class:`Transport`); :class:`RequestsTransport` (``requests`` + urllib3, a
caller-owned session with :class:`DeadlineAdapter` mounted) is the one the daemon uses.
"""

from __future__ import annotations

import errno
import io
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from advisor.conventions import (
    REASON_CONNECTION_REFUSED,
    REASON_HTTP_STATUS,
    REASON_PARSE_ERROR,
    REASON_TIMEOUT,
    REASON_TOO_LARGE,
)

__all__ = [
    "DeadlineAdapter",
    "EdgeConnectionError",
    "EdgeDecodeError",
    "EdgeError",
    "EdgeHTTPStatusError",
    "EdgeLimits",
    "EdgeResponse",
    "EdgeTimeoutError",
    "EdgeTooLargeError",
    "RequestsTransport",
    "Transport",
    "deadline_scope",
    "read_capped",
    "target_session",
    "use_deadline_adapter",
]

CHUNK_BYTES: Final = 64 * 1024


# --- error classes ----------------------------------------------------------------------------------------------


class EdgeError(Exception):
    """A request that failed at the edge.

    Attributes:
        reason: one of :data:`advisor.conventions.SCRAPE_ERROR_REASONS`.
        message: a short cause free of URL secrets.
        status: the HTTP status when a response had arrived, else ``None``.
    """

    reason: str = REASON_CONNECTION_REFUSED

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class EdgeTimeoutError(EdgeError):
    """Connect timeout, a stall longer than the read timeout, or the whole-request deadline."""

    reason = REASON_TIMEOUT


class EdgeConnectionError(EdgeError):
    """The connection could not be made or was lost (refused, DNS, TLS, reset, body cut short, bad URL)."""

    reason = REASON_CONNECTION_REFUSED


class EdgeHTTPStatusError(EdgeError):
    """The answer is not one to read (too many redirects); other statuses are returned to the caller."""

    reason = REASON_HTTP_STATUS


class EdgeTooLargeError(EdgeError):
    """``Content-Length`` or the decoded bytes exceed the cap."""

    reason = REASON_TOO_LARGE


class EdgeDecodeError(EdgeError):
    """The body's ``Content-Encoding`` does not decode."""

    reason = REASON_PARSE_ERROR


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """Time and size limits of one request.

    Attributes:
        connect_timeout: seconds to establish the connection (TCP and TLS).
        read_timeout: seconds any single read may wait; with ``connect_timeout`` it makes the deadline.
        max_bytes: cap on the decoded body, bytes.
        deadline_seconds: a shorter whole-request deadline, seconds, for callers whose one timeout is for the
            whole request (the notifiers' ``timeout_seconds``); ``None``: ``connect_timeout + read_timeout``.
    """

    connect_timeout: float
    read_timeout: float
    max_bytes: int
    deadline_seconds: float | None = None

    @property
    def total_seconds(self) -> float:
        """The whole-request deadline, seconds from the start."""
        total = self.connect_timeout + self.read_timeout
        return total if self.deadline_seconds is None else min(total, self.deadline_seconds)


# --- the deadline over the whole request -----------------------------------------------------------------------

_STATE = threading.local()


@contextmanager
def deadline_scope(deadline: float) -> Iterator[None]:
    """Within the block, every socket read of this thread's requests (through a :class:`DeadlineAdapter`) ends
    by ``deadline`` (a :func:`time.monotonic` value)."""
    previous = getattr(_STATE, "deadline", None)
    _STATE.deadline = deadline
    try:
        yield
    finally:
        _STATE.deadline = previous


def _time_left() -> float | None:
    deadline: float | None = getattr(_STATE, "deadline", None)
    return None if deadline is None else deadline - time.monotonic()


class _DeadlineSocket:
    """A connected socket whose every receive is cut to the time left before the request's deadline."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._timeout: float | None = sock.gettimeout()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def settimeout(self, value: float | None) -> None:
        self._timeout = value
        self._sock.settimeout(value)

    def gettimeout(self) -> float | None:
        return self._timeout

    def _cap(self) -> None:
        left = _time_left()
        if left is None:
            self._sock.settimeout(self._timeout)
            return
        if left <= 0:
            raise TimeoutError("the request deadline passed")
        self._sock.settimeout(left if self._timeout is None else min(self._timeout, left))

    def recv(self, size: int, flags: int = 0) -> bytes:
        self._cap()
        data: bytes = self._sock.recv(size, flags)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._cap()
        n: int = self._sock.recv_into(buffer, nbytes, flags)
        return n

    def makefile(self, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if mode != "rb":
            return self._sock.makefile(mode, buffering, **kwargs)
        # as socket.makefile does: the socket stays open until the reader is closed too
        self._sock._io_refs += 1
        return io.BufferedReader(_DeadlineReader(self))


class _DeadlineReader(io.RawIOBase):
    """``sock.makefile("rb")`` for http.client: reads the status line, headers and body through the cap."""

    def __init__(self, sock: _DeadlineSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._sock._decref_socketios()
        super().close()


class _DeadlineConnect:
    """Mixin for urllib3's connection classes: refuse to connect once the deadline has passed, then wrap the
    socket so every read is cut to the time left."""

    sock: Any

    def connect(self) -> None:
        left = _time_left()
        if left is not None and left <= 0:
            raise urllib3.exceptions.ConnectTimeoutError(self, "the request deadline passed before connecting")
        super().connect()  # type: ignore[misc]
        self.sock = _DeadlineSocket(self.sock)


class _DeadlineHTTPConnection(_DeadlineConnect, HTTPConnection):
    pass


class _DeadlineHTTPSConnection(_DeadlineConnect, HTTPSConnection):
    pass


class _DeadlineHTTPPool(HTTPConnectionPool):
    ConnectionCls = _DeadlineHTTPConnection


class _DeadlineHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _DeadlineHTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """A ``requests`` adapter whose connections honour :func:`deadline_scope` on every read, status line and
    headers included (through a proxy too). Same constructor as :class:`requests.adapters.HTTPAdapter`."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _DeadlineHTTPPool, "https": _DeadlineHTTPSPool}

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = {"http": _DeadlineHTTPPool, "https": _DeadlineHTTPSPool}
        return manager


def use_deadline_adapter(session: requests.Session) -> requests.Session:
    """Mount a :class:`DeadlineAdapter` for ``http://`` and ``https://`` on ``session`` unless one is there,
    keeping the pool sizes of the adapter it replaces. Returns ``session``."""
    for prefix in ("http://", "https://"):
        current = session.adapters.get(prefix)
        if isinstance(current, DeadlineAdapter):
            continue
        pool_connections = getattr(current, "_pool_connections", 10)
        pool_maxsize = getattr(current, "_pool_maxsize", 10)
        session.mount(prefix, DeadlineAdapter(pool_connections=pool_connections, pool_maxsize=pool_maxsize))
    return session


# --- the byte cap -----------------------------------------------------------------------------------------------


def read_capped(response: requests.Response, deadline: float, limits: EdgeLimits, *, noun: str = "body") -> bytes:
    """Read the decoded body chunk by chunk, checking the deadline and the cap after every chunk.

    ``read1`` returns as soon as any bytes are available, so a trickling server is caught by the deadline.

    Raises:
        EdgeTooLargeError: more than ``limits.max_bytes`` decoded bytes.
        EdgeTimeoutError: the deadline passed, or a read stalled longer than the read timeout.
        EdgeDecodeError: the Content-Encoding does not decode.
        EdgeConnectionError: the connection was lost mid-body.
    """
    status = response.status_code
    max_bytes = limits.max_bytes
    late = f"{noun} not complete within the deadline of {limits.total_seconds:g}s"
    raw = response.raw
    parts: list[bytes] = []
    total = 0
    try:
        with deadline_scope(deadline):
            while True:
                if deadline - time.monotonic() <= 0:
                    raise _DeadlineError
                # never more than one byte past the cap: enough to tell "over" from "exactly at"
                chunk = raw.read1(min(CHUNK_BYTES, max_bytes - total + 1), decode_content=True)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise EdgeTooLargeError(f"{noun} exceeds the cap of {max_bytes} bytes", status)
                parts.append(chunk)
    except _DeadlineError:
        raise EdgeTimeoutError(late, status) from None
    except urllib3.exceptions.ReadTimeoutError:
        if time.monotonic() >= deadline - 0.005:  # cut at the deadline, not by a stall
            raise EdgeTimeoutError(late, status) from None
        raise EdgeTimeoutError(f"{noun} read stalled longer than {limits.read_timeout:g}s", status) from None
    except urllib3.exceptions.DecodeError:
        raise EdgeDecodeError(f"{noun} could not be decoded (Content-Encoding)", status) from None
    except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError) as exc:
        raise EdgeConnectionError(f"connection lost while reading {noun} ({cause_name(exc)})", status) from None
    return b"".join(parts)


class _DeadlineError(Exception):
    """The whole-request deadline passed while the body was streaming."""


# --- sending ----------------------------------------------------------------------------------------------------


def open_stream(
    session: requests.Session,
    method: str,
    url: str,
    limits: EdgeLimits,
    deadline: float,
    **kwargs: Any,
) -> requests.Response:
    """Send one request through ``session`` (a :class:`DeadlineAdapter` is mounted first) and return the streamed
    response once its headers are in; the caller reads the body (:func:`read_capped`) and closes it.

    Raises:
        EdgeTimeoutError: connect timeout, no headers within the read timeout, or the deadline passed.
        EdgeConnectionError: refused, DNS, TLS, an invalid URL (the message says which).
        EdgeHTTPStatusError: too many redirects.
    """
    use_deadline_adapter(session)
    try:
        with deadline_scope(deadline):
            return session.request(
                method,
                url,
                stream=True,
                timeout=(limits.connect_timeout, limits.read_timeout),
                hooks={"response": _skip_redirect_body},
                **kwargs,
            )
    except requests.exceptions.ConnectTimeout:
        raise EdgeTimeoutError(f"connect timeout after {limits.connect_timeout:g}s") from None
    except requests.exceptions.ReadTimeout:
        if time.monotonic() >= deadline - 0.005:
            raise EdgeTimeoutError(f"no response headers within the deadline of {limits.total_seconds:g}s") from None
        raise EdgeTimeoutError(f"no response headers within read timeout {limits.read_timeout:g}s") from None
    except requests.exceptions.TooManyRedirects:
        raise EdgeHTTPStatusError("too many redirects") from None
    except requests.exceptions.ConnectionError as exc:
        if is_refused(exc):
            raise EdgeConnectionError("connection refused") from None
        raise EdgeConnectionError(f"connection failed ({cause_name(exc)})") from None
    except (requests.exceptions.RequestException, ValueError, OSError) as exc:
        raise EdgeConnectionError(f"request failed ({cause_name(exc)})") from None


def _skip_redirect_body(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
    """Response hook: a redirect's body is never read. ``requests`` reads each redirect's body whole before
    following it (``Session.resolve_redirects``: ``resp.content``), decoded and without any cap, so a 302 whose
    body is a gzip bomb would take gigabytes before the deadline. Marked as read (empty), the body is dropped with
    its connection here."""
    if response.is_redirect:
        response.raw.close()
        response._content = b""
        setattr(response, "_content_consumed", True)  # noqa: B010 (not in the type stubs)
    return response


@dataclass(frozen=True, slots=True)
class EdgeResponse:
    """A complete answer: status, reason phrase, headers and the decoded body (capped)."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


class Transport(Protocol):
    """Sends one request under :class:`EdgeLimits`; raises :class:`EdgeError` for every failure."""

    def request(
        self,
        method: str,
        url: str,
        limits: EdgeLimits,
        *,
        headers: Mapping[str, str] | None = None,
        data: bytes | Sequence[tuple[str, str]] | None = None,
        error_body_bytes: int | None = None,
    ) -> EdgeResponse:
        """The answer, body read completely (2xx) or up to ``error_body_bytes`` (other statuses)."""
        ...


class RequestsTransport:
    """:class:`Transport` over a caller-owned ``requests.Session`` (connection reuse, TLS settings, proxies)."""

    def __init__(self, session: requests.Session, **request_kwargs: Any) -> None:
        self.session = use_deadline_adapter(session)
        self._kwargs = request_kwargs

    def request(
        self,
        method: str,
        url: str,
        limits: EdgeLimits,
        *,
        headers: Mapping[str, str] | None = None,
        data: bytes | Sequence[tuple[str, str]] | None = None,
        error_body_bytes: int | None = None,
    ) -> EdgeResponse:
        """See :class:`Transport`. A 2xx whose ``Content-Length`` exceeds the cap is refused before reading."""
        deadline = time.monotonic() + limits.total_seconds
        response = open_stream(
            self.session, method, url, limits, deadline, headers=dict(headers or {}), data=data, **self._kwargs
        )
        with response:
            status = response.status_code
            if 200 <= status < 300:
                declared = content_length(response)
                if declared is not None and declared > limits.max_bytes:
                    raise EdgeTooLargeError(
                        f"Content-Length {declared} bytes exceeds the cap of {limits.max_bytes} bytes", status
                    )
                body = read_capped(response, deadline, limits)
            else:
                body = _read_some(response, deadline, error_body_bytes or 0)
            return EdgeResponse(status, response.reason or "", dict(response.headers), body)


def _read_some(response: requests.Response, deadline: float, limit: int) -> bytes:
    """Up to ``limit`` bytes of a body, best effort (``b""`` when it cannot be read before the deadline)."""
    data = b""
    try:
        with deadline_scope(deadline):
            while len(data) < limit and time.monotonic() <= deadline:
                chunk = response.raw.read1(limit - len(data), decode_content=True)
                if not chunk:
                    break
                data += chunk
    except Exception:  # best effort only: the status code is the error
        return data
    return data


def content_length(response: requests.Response) -> int | None:
    """The declared ``Content-Length`` as an int, ``None`` when absent or malformed."""
    value = response.headers.get("Content-Length")
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def is_refused(exc: BaseException) -> bool:
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


def cause_name(exc: BaseException) -> str:
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


def target_session(url: str) -> requests.Session:
    """A ``requests.Session`` for scraping ``url``, with what ``requests`` would read from the environment on
    every request read once, now, and set on the session (``trust_env`` off): the same behaviour, computed once
    per target instead of once per scrape (``merge_environment_settings`` walks ``os.environ`` twice per request:
    ~0.6 ms of a 1.7 ms scrape, measured with cProfile at 1,000 targets).

    What is resolved, as ``requests.Session.request`` and ``prepare_request`` resolve it (requests/sessions.py,
    requests/utils.py):

    * proxies: ``get_environ_proxies(url)`` — ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (either case), empty
      when ``NO_PROXY`` covers the host;
    * the CA bundle: ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``, when set;
    * credentials from ``NETRC`` or ``~/.netrc`` for the host (which, as in ``requests``, take precedence over
      userinfo in the URL).

    The environment is read when the session is made (start-up, a reload adding the target, ``file_sd``); a change
    to it afterwards applies to targets added later. A redirect to another host gets no netrc credentials and
    keeps the proxy resolved for ``url``.
    """
    session = requests.Session()
    session.proxies.update(requests.utils.get_environ_proxies(url, no_proxy=None))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    auth = requests.utils.get_netrc_auth(url)
    if auth:
        session.auth = auth
    session.trust_env = False
    return session
