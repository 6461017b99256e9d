"""The advisor's HTTP server: ``/metrics``, ``/healthz``, ``/readyz``, ``/api/v1/*`` and a status page ``/``.

Standard library ``ThreadingHTTPServer``; prometheus-client renders ``/metrics`` from the injected
registry. Nothing here makes the daemon fetch a URL: the API reads the last cycle's immutable result,
runs the capacity pass for ``POST /api/v1/plan`` (model presets only, never a file), and writes snoozes
and acknowledgements to the state file.

* ``--web.config.file`` (:mod:`advisor.web_config`): TLS and basic auth for everything served. TLS
  handshakes run on the connection's own thread, so a slow client never blocks ``accept``.
* Write endpoints (snooze, ack) need basic auth or a loopback listen address, else 403. They take
  ``Content-Type: application/json`` (API clients) or ``application/x-www-form-urlencoded`` (the status page's
  forms). A form needs a CSRF token (:func:`csrf_token`, rendered into the page) or an ``Origin``/``Referer``
  whose host is the request's ``Host``; a JSON request needs the same when it carries an ``Origin`` (a browser
  cannot send JSON cross-origin without a CORS preflight this server never grants). Anything else is 403.
  Each snooze or ack records who made it (the basic-auth user, else the client address) and when.
* Clients that do not play fair (as Go's ``net/http`` and Prometheus's ``--web.max-connections`` bound them):
  at most ``max_connections`` connections are held (:func:`connection_budget` lowers it to what the process's
  descriptor limit leaves beside :data:`FD_RESERVE`); when a new one arrives at the cap, the connection that has
  waited longest for its request head (a slow or silent client: none of its bytes wait unread, nor does its thread
  hold any it is parsing) is closed to make room, and when every held connection is mid-request, ``accept`` waits
  (the newcomer stays in the kernel's backlog, holding no descriptor here). A request head must arrive within
  ``head_timeout`` of the connection (TLS handshake included) and a body within ``body_timeout``
  (:data:`BODY_TIMEOUT`), however slowly the bytes drip in. A head past its deadline is cut without an answer (Go's
  ``ReadHeaderTimeout``); a body past its deadline is answered ``408 Request Timeout`` naming the bytes that came
  (RFC 9110 §15.5.9), then the connection is closed. Each connection is closed after its response (HTTP/1.0), so
  none idles between requests.
* An error answered before the body was read (401, 403, 404, 405, …) reads and drops a body of up to
  ``MAX_BODY_BYTES`` first (a 413's, up to :data:`_DRAIN_LIMIT`), so that the client, still sending it, sees the
  answer rather than a reset connection; a larger body is not read and the connection is closed.
* Errors are JSON ``{"error", "status", "details"}``: 400 (with field paths for invalid bodies), 401, 403,
  404, 405 (with ``Allow``), 408 (a body that did not arrive in time), 409, 411, 413 (bodies over 1 MiB), 415.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import hmac
import io
import ipaddress
import json
import logging
import math
import re
import resource
import secrets
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs, quote, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ValidationError

from advisor import __version__
from advisor.acks import Ack, AckStore
from advisor.api_models import (
    MAX_BODY_BYTES,
    AckRequest,
    PlanDeployment,
    PlanRequest,
    SnoozeRequest,
    openapi_document,
    parse_snooze_duration,
    validation_details,
)
from advisor.domain import Recommendation, rfc3339
from advisor.errors import CapacityError, StateError, UnknownNameError, WontStartError
from advisor.exporter import MetricsRenderer
from advisor.hangups import QuietHangupServer
from advisor.results import CycleResult, DeploymentResult
from advisor.service import Service
from advisor.status_page import CONTENT_SECURITY_POLICY, deployment_state_reason, redact_text, render_status_page
from advisor.web_config import WebConfig, WebConfigSource

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

_REC = r"(?P<id>[^/]+)"
_ROUTES: list[tuple[re.Pattern[str], tuple[str, ...], str]] = [
    (re.compile(r"^/$"), ("GET",), "status_page"),
    (re.compile(r"^/metrics$"), ("GET",), "metrics"),
    (re.compile(r"^/healthz$"), ("GET",), "healthz"),
    (re.compile(r"^/readyz$"), ("GET",), "readyz"),
    (re.compile(r"^/api/v1/openapi\.json$"), ("GET",), "openapi"),
    (re.compile(r"^/api/v1/deployments$"), ("GET",), "deployments"),
    (re.compile(r"^/api/v1/recommendations$"), ("GET",), "recommendations"),
    (re.compile(rf"^/api/v1/recommendations/{_REC}$"), ("GET",), "recommendation"),
    (re.compile(rf"^/api/v1/recommendations/{_REC}/snooze$"), ("POST",), "snooze"),
    (re.compile(rf"^/api/v1/recommendations/{_REC}/ack$"), ("POST",), "ack"),
    (re.compile(r"^/api/v1/plan$"), ("POST",), "plan"),
    (re.compile(r"^/-/reload$"), ("POST", "PUT"), "reload"),
]
_API_QUERY: dict[str, frozenset[str]] = {
    "openapi": frozenset(),
    "deployments": frozenset({"deployment"}),
    "recommendations": frozenset({"deployment", "status"}),
    "recommendation": frozenset(),
    "snooze": frozenset(),
    "ack": frozenset(),
    "plan": frozenset(),
}
"""The query parameters each ``/api/v1`` route reads; any other is refused (400), not ignored: a typo such as
``?deploymnet=chat`` answered every deployment's recommendations with 200 (breaker 28). The status page, ``/metrics``
and the probes keep ignoring theirs (scrapers and browsers add their own)."""

_CSRF_SECRET = secrets.token_bytes(32)
"""Per-process key of the CSRF tokens: a restart invalidates the forms of pages rendered before it."""

_FORM = "application/x-www-form-urlencoded"


def _refuse_unknown_query(route: str, query: dict[str, list[str]]) -> None:
    """Raise a 400 :class:`ApiError` naming the first query parameter ``route`` does not read
    (:data:`_API_QUERY`), with the closest known one; routes outside the API read what they like."""
    known = _API_QUERY.get(route)
    if known is None:
        return
    for key in query:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            accepted = ", ".join(sorted(known)) or "none"
            raise ApiError(400, f"unknown query parameter {key[:40]!r} (accepted here: {accepted}){hint}")


def csrf_token(identity: str) -> str:
    """The CSRF token of an identity (``user:<basic-auth user>`` or ``addr:<client address>``): hex HMAC-SHA256
    of it under :data:`_CSRF_SECRET` (OWASP's "HMAC based token pattern"), so only a page this process rendered
    for that identity carries it."""
    return hmac.new(_CSRF_SECRET, identity.encode(), hashlib.sha256).hexdigest()


_DRAIN_LIMIT = 8 * MAX_BODY_BYTES
"""An oversized body up to this size is read and dropped before the 413, so the client sees the answer
rather than a reset connection; a larger one is not read (the connection is closed)."""


DEFAULT_MAX_CONNECTIONS = 512
"""``--web.max-connections``'s default, as Prometheus's flag of the same name (``cmd/prometheus/main.go``)."""
FD_RESERVE = 256
"""File descriptors kept out of the HTTP server's reach for everything else the daemon opens: scrape and
receiver connections (the scrape pool is at most 32 workers, plus the sessions' kept-alive connections), the
outbox's and the state file's files, logs and the interpreter's own."""
HEAD_TIMEOUT = 10.0
"""Seconds a new connection has to deliver its whole request head (TLS handshake included), however slowly
it drips in (Go's ``http.Server.ReadHeaderTimeout``): a slowloris client is cut off."""
BODY_TIMEOUT = 30.0
"""Seconds a request body (at most :data:`_DRAIN_LIMIT` bytes) may take to arrive, the server's ``body_timeout`` by
default; past it the request is answered 408. Each read of the body waits at most the time left (a socket
timeout: it leaves a TLS connection able to send the answer, as cutting the socket would not)."""
BODY_CUT_SLACK = 5.0
"""Seconds past a body's deadline after which the serve loop cuts the connection without an answer: a backstop,
should the handler's thread not come back from its read at the deadline."""


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit, as the Go runtime does for Prometheus at start
    (go1.19 ``os`` package); returns ``(soft, hard)`` in force afterwards (``RLIM_INFINITY`` is -1)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # e.g. a hard limit above the kernel's nr_open
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft, hard


def connection_budget(max_connections: int, fd_limit: int | None = None) -> int:
    """The connection cap in force: ``max_connections`` (0: no cap of its own), lowered so that the cap plus
    :data:`FD_RESERVE` fits the soft descriptor limit ``fd_limit`` (default: the process's ``RLIMIT_NOFILE``;
    ``RLIM_INFINITY`` leaves the cap as asked). Lowering it is logged as a warning. Returns 0 for "no cap".

    Raises:
        ValueError: ``max_connections`` is negative.
    """
    if max_connections < 0:
        raise ValueError(f"--web.max-connections must be 0 (no limit) or more, got {max_connections}")
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0] if fd_limit is None else fd_limit
    if limit == resource.RLIM_INFINITY or limit < 0:
        return max_connections
    room = max(16, limit - FD_RESERVE) if limit > 32 else max(1, limit // 2)
    if max_connections == 0 or max_connections > room:
        log.warning(
            "--web.max-connections %s does not fit the open-file limit of %d with %d descriptors kept for scrapes, "
            "receivers and the outbox: serving at most %d connections (raise LimitNOFILE / ulimit -n)",
            max_connections or "0 (no limit)",
            limit,
            FD_RESERVE,
            room,
        )
        return room
    return max_connections


class WebConfigMetrics(Collector):
    """``advisor_web_config_last_reload_successful`` (gauge, 1/0) and ``advisor_web_config_reload_failures_total``
    (counter): re-reads of ``--web.config.file`` taken or refused (the running configuration kept), from a
    :class:`WebConfigSource`; as Prometheus's ``prometheus_config_last_reload_successful``."""

    def __init__(self, source: WebConfigSource) -> None:
        self.source = source

    def collect(self) -> list[Metric]:
        """The two families, read from the source now."""
        ok = GaugeMetricFamily(
            "advisor_web_config_last_reload_successful",
            "Whether the last re-read of --web.config.file was taken (0: refused; the running one is kept).",
            value=1.0 if self.source.last_reload_ok else 0.0,
        )
        failed = CounterMetricFamily(
            "advisor_web_config_reload_failures",
            "Re-reads of --web.config.file refused (unreadable, invalid, empty, or switching TLS or basic auth "
            "off); the running configuration was kept.",
            value=float(self.source.reload_failures),
        )
        return [ok, failed]


@dataclasses.dataclass
class _Conn:
    """One held connection: the socket to cut (the TLS one once wrapped), whether it waits for a request head
    (then it may be closed to make room), since when (monotonic s) and its deadline (monotonic s, or None)."""

    sock: socket.socket
    waiting: bool
    since: float
    deadline: float | None
    cut: bool = False
    busy: bool = False
    """Its thread holds bytes it read and is working on them (not blocked waiting for more): see :class:`_ReadWatch`."""


class _ReadWatch(io.RawIOBase):
    """A connection's socket reader (``inner``: the :class:`socket.SocketIO` under the handler's ``rfile``, over
    ``sock``) that marks ``conn.busy`` from the moment bytes are there to read until the next read starts. So a
    connection whose thread read its whole request head and is still parsing it (descheduled on a loaded machine:
    CI, 2026-12-04, the cap's newcomer cut such a connection, dropping its request) is not taken for an idle one,
    while a client that drips its head keeps its thread blocked in a read, not busy, and stays closable.

    Each read first waits for bytes without taking them (``MSG_PEEK`` on the plain socket; none when a TLS socket
    already holds decrypted bytes), then marks the connection busy, then reads: at every instant the bytes are
    either still in the kernel (:func:`_bytes_pending`) or marked busy. Marking after the read left a gap (the
    bytes taken, the mark not yet set) in which a thread descheduled on a loaded machine was cut (CI, 2026-12-05).
    The price, over TLS only: a client that sends part of a TLS record after its handshake is busy until the rest
    comes, so it is not closed to make room; its head deadline (``head_timeout``) still cuts it."""

    def __init__(self, inner: io.RawIOBase, sock: socket.socket, conn: _Conn) -> None:
        super().__init__()
        self._inner = inner
        self._sock = sock
        self._conn = conn

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._conn.busy = False
        self._await_bytes()
        self._conn.busy = True
        n = self._inner.readinto(buffer)
        self._conn.busy = bool(n)
        return n

    def _await_bytes(self) -> None:
        """Block (within the socket's timeout) until bytes or end-of-file wait in the kernel, taking none.

        Raises:
            TimeoutError: none came within the socket's timeout (as the read itself would raise).
        """
        if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
            return
        try:
            socket.socket.recv(self._sock, 1, socket.MSG_PEEK)
        except TimeoutError:
            raise
        except OSError:
            pass  # a reset or a cut socket: the read below raises or sees end-of-file as it would have

    def close(self) -> None:
        self._inner.close()
        super().close()


def _cut(conn: _Conn) -> None:
    """Wake the connection's thread from a blocked read (it sees end-of-file and closes the connection). The
    plain socket's ``shutdown``, also for a TLS socket: :meth:`ssl.SSLSocket.shutdown` would drop its TLS
    state under the reading thread."""
    conn.cut = True
    with contextlib.suppress(OSError):
        socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)


def _bytes_pending(sock: socket.socket) -> bool:
    """Whether the client's bytes (a request head, a TLS hello, or its end-of-file) wait unread in the kernel:
    then the connection is not idle but not yet picked up by its thread (slow to start on a loaded machine), and
    closing it would drop a request that has arrived."""
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # closed meanwhile: nothing to keep
        return False


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9090`` for IPv6; ``:9090`` for all interfaces) → ``(host, port)``.

    Raises:
        ValueError: naming the expected form.
    """
    host, sep, port = listen.rpartition(":")
    # ASCII digits only: str.isdigit() also takes "²" (int() refuses it) and "٩" (int() reads it as 9)
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen must be HOST:PORT (e.g. 127.0.0.1:9188), got {listen!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether a bound address only accepts local connections (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host == "localhost"


def _finite(obj: Any) -> Any:
    """JSON-ready copy with NaN and ±Inf as ``null`` (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


SINGLE_HEADERS: Final = ("Host", "Content-Length", "Transfer-Encoding", "Authorization", "Content-Type")
"""Request headers that may appear once (RFC 9112 §3.2 and §6.3: several ``Host`` or differing ``Content-Length``
fields make a request invalid; the others are read as one value here): a request carrying one twice is refused with
400 rather than read by its first (breaker 20: two ``Host`` headers passed the local-host check on the first)."""


class ApiError(Exception):
    """An error answer: ``status``, a message, optional field details and headers."""

    def __init__(
        self,
        status: int,
        message: str,
        details: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or []
        self.headers = headers or {}


class AdvisorHTTPServer(QuietHangupServer):
    """Serves one :class:`Service` and registry.

    Args:
        address: ``(host, port)`` to bind (port 0: any free port).
        service: the running service (its ``result``, ``collector``, ``state_file``, ``healthy``).
        registry: rendered at ``/metrics``.
        web_config: a ``--web.config.file`` path or a loaded source (``None``: plain HTTP, no auth).
        acks: the snooze/ack store the loop consults; default the service's current ``acks`` (read at each
            request, so a reload's new store is used), else a store on the service's state file.
        max_connections: ``--web.max-connections`` (0: no cap of its own), lowered by :func:`connection_budget`.
        head_timeout: seconds (see :data:`HEAD_TIMEOUT`).
        body_timeout: seconds a request body may take to arrive, then 408 (see :data:`BODY_TIMEOUT`).

    Raises:
        ConfigError: the web config file does not load.
        StateError: the state file's acks cannot be read.
        OSError: the address cannot be bound.
        ValueError: ``max_connections`` is negative.
    """

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        service: Service,
        registry: CollectorRegistry,
        web_config: WebConfigSource | str | Path | None = None,
        acks: AckStore | None = None,
        reload_hook: Callable[[], tuple[bool, str]] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        head_timeout: float = HEAD_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
    ) -> None:
        self.reload_hook = reload_hook
        self.max_connections = connection_budget(max_connections)
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self._conns: dict[socket.socket, _Conn] = {}
        self._room = threading.Condition()
        self._closing = False
        self._local = threading.local()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.service = service
        self.registry = registry
        self.web = web_config if isinstance(web_config, WebConfigSource) else WebConfigSource(web_config)
        self._acks = acks
        # a service without its own store (a stand-in) gets one on its state file, made once
        self._own_acks = (
            None
            if acks is not None or isinstance(getattr(service, "acks", None), AckStore)
            else AckStore(service.state_file)
        )
        self._openapi: dict[bool, bytes] = {}
        self.metrics_renderer = MetricsRenderer()
        self._web_metrics: WebConfigMetrics | None = None
        super().__init__(address, _Handler)
        if self.web.path is not None:
            self._web_metrics = WebConfigMetrics(self.web)
            try:
                registry.register(self._web_metrics)
            except ValueError:  # another server on this registry exports them already
                self._web_metrics = None
        bound = self.server_address[0]
        self.host = bound.decode() if isinstance(bound, bytes) else str(bound)
        self.loopback = is_loopback(self.host)

    @property
    def acks(self) -> AckStore:
        """The snooze/ack store: the one passed in, else the service's *current* one (read at each request, so
        after a reload snoozes and acks reach the store the notifier consults), else the server's own."""
        if self._acks is not None:
            return self._acks
        current = getattr(self.service, "acks", None)
        if isinstance(current, AckStore):
            return current
        assert self._own_acks is not None
        return self._own_acks

    @property
    def write_needs_auth(self) -> bool:
        """Whether snooze/ack are refused without basic auth (a non-loopback listen address)."""
        return not self.loopback

    def url(self) -> str:
        """``http(s)://host:port`` the server listens on."""
        host, port = self.server_address[:2]
        h = str(host)
        scheme = "https" if self.web.current().ssl_context is not None else "http"
        return f"{scheme}://[{h}]:{port}" if ":" in h else f"{scheme}://{h}:{port}"

    def start_background(self) -> threading.Thread:
        """Serve on a daemon thread; returns it."""
        t = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        t.start()
        return t

    # -- connections: the cap, the deadlines ---------------------------------------------------------
    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept one connection once there is room for it (see the module docstring), and hold it as
        waiting for its request head, due within ``head_timeout``."""
        self._make_room()
        sock, addr = super().get_request()
        now = time.monotonic()
        with self._room:
            self._conns[sock] = _Conn(sock, True, now, now + self.head_timeout)
        return sock, addr

    def _make_room(self) -> None:
        cap = self.max_connections
        if cap <= 0:
            return
        with self._room:
            while len(self._conns) >= cap and not self._closing:
                self._cut_overdue(time.monotonic())
                live = [c for c in self._conns.values() if not c.cut]
                idle = [c for c in live if c.waiting and not c.busy and not _bytes_pending(c.sock)]
                if len(live) >= cap and idle:
                    _cut(min(idle, key=lambda c: c.since))
                    log.debug("connection cap %d reached: closed the longest-waiting idle connection", cap)
                # the cut connections' threads release them; mid-request ones finish or hit their deadlines
                self._room.wait(0.05)

    def _cut_overdue(self, now: float) -> None:
        for c in self._conns.values():
            if not c.cut and c.deadline is not None and now > c.deadline:
                _cut(c)

    def service_actions(self) -> None:
        """On the serve loop, at least every poll interval: cut connections past their deadline."""
        with self._room:
            self._cut_overdue(time.monotonic())

    def shutdown_request(self, request: Any) -> None:
        """Release a connection (its slot and its descriptor)."""
        with self._room:
            self._conns.pop(request, None)
            self._room.notify_all()
        super().shutdown_request(request)

    def _conn_state(self, waiting: bool, timeout: float | None) -> None:
        """The calling connection thread's connection now waits for a request head (closable to make room)
        or not, with a deadline ``timeout`` seconds from now (None: none)."""
        conn: _Conn | None = getattr(self._local, "conn", None)
        if conn is None:
            return
        now = time.monotonic()
        with self._room:
            conn.waiting = waiting
            conn.since = now
            conn.deadline = None if timeout is None else now + timeout
            if conn.cut:  # cut while changing state: make sure its thread sees it
                _cut(conn)

    def open_connections(self) -> int:
        """Connections held now (each one descriptor)."""
        with self._room:
            return len(self._conns)

    def shutdown(self) -> None:
        """Stop the serve loop (an ``accept`` waiting for room gives up)."""
        with self._room:
            self._closing = True
            self._room.notify_all()
        super().shutdown()

    def server_close(self) -> None:
        """Close the listening socket and every held connection, then wait for their threads."""
        with self._room:
            self._closing = True
            for c in self._conns.values():
                _cut(c)
            self._room.notify_all()
        if self._web_metrics is not None:
            with contextlib.suppress(KeyError):
                self.registry.unregister(self._web_metrics)
            self._web_metrics = None
        super().server_close()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Per connection, on its own thread: the TLS handshake (when configured), then the handler."""
        with self._room:
            conn = self._conns.get(request)
        self._local.conn = conn
        ctx = self.web.current().ssl_context
        if ctx is None:
            _Handler(request, client_address, self)
            return
        try:
            request.settimeout(10.0)
            tls = ctx.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except (ssl.SSLError, OSError) as exc:
            log.debug("TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            if conn is not None:
                with self._room:
                    conn.sock = tls  # the original socket object is detached now
                    if conn.cut:
                        _cut(conn)
            tls.do_handshake()
            _Handler(tls, client_address, self)
        except (ssl.SSLError, OSError) as exc:
            log.debug("TLS connection with %s failed: %s", client_address, exc)
        finally:
            with contextlib.suppress(OSError):
                tls.close()

    def openapi_bytes(self, basic_auth: bool) -> bytes:
        """The OpenAPI document as served (cached per auth setting)."""
        doc = self._openapi.get(basic_auth)
        if doc is None:
            doc = json.dumps(openapi_document(self.write_needs_auth, basic_auth), indent=1).encode()
            self._openapi[basic_auth] = doc
        return doc

    # -- the API's read model ----------------------------------------------------------------------
    def resolved(self) -> list[Recommendation]:
        """Recently resolved recommendations, newest first (from the collector, which sees every cycle)."""
        fn: Callable[[], list[Recommendation]] | None = getattr(self.service.collector, "recently_resolved", None)
        return fn() if fn is not None else []

    def rec_dict(self, r: Recommendation, status: str, now: float) -> dict[str, Any]:
        d = r.as_dict()
        d["status"] = status
        ack = self.acks.get(r.id, now) if status == "open" else None
        d["suppression"] = None if ack is None else ack.as_dict()
        return d

    def deployment_dict(self, dep: DeploymentResult, now: float) -> dict[str, Any]:
        d = dep.as_dict()
        d["state_reason"] = deployment_state_reason(dep)
        for t in d["targets"]:
            for k in ("error", "state_reason"):
                if isinstance(t.get(k), str):
                    t[k] = redact_text(t[k])
        d["recommendations"] = [self.rec_dict(r, "open", now) for r in dep.recommendations]
        return d


class _Handler(BaseHTTPRequestHandler):
    server: AdvisorHTTPServer
    server_version = f"capacity-advisor/{__version__}"
    timeout = 30.0  # seconds a client may take to send its request (slow clients do not hold threads)
    user: str | None = None
    web: WebConfig

    _body_read = False

    def setup(self) -> None:
        """The socket's reader, watched (:class:`_ReadWatch`) when the connection is held under the cap."""
        super().setup()
        conn: _Conn | None = getattr(self.server._local, "conn", None)
        if conn is not None and isinstance(self.rfile, io.BufferedReader):
            self.rfile = io.BufferedReader(_ReadWatch(self.rfile.detach(), self.connection, conn))

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s %s", self.address_string(), format % args)

    def parse_request(self) -> bool:
        """The request head; once whole, the connection is mid-request (no longer closed to make room)."""
        ok = super().parse_request()
        if ok:
            self.server._conn_state(waiting=False, timeout=None)
        return ok

    def __getattr__(self, name: str) -> Any:
        # every method, including ones this server does not know, goes through the router (405, not 501)
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    # -- sending -----------------------------------------------------------------------------------
    def _send(self, code: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for k, v in {**getattr(self, "web", WebConfig()).headers, **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def _json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(_finite(obj), indent=1, allow_nan=False, default=str).encode()
        self._send(code, body, "application/json", headers)

    def _error(self, e: ApiError) -> None:
        self._json(e.status, {"error": e.message, "status": e.status, "details": e.details}, e.headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's errors (bad request line, header too long, …) as JSON too."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self._error(ApiError(code, message or self.responses.get(code, ("error",))[0]))

    # -- dispatch ----------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        try:
            self.web = self.server.web.current()
            self._route()
        except ApiError as e:
            if e.status in (408, 411, 413) or not self._discard_body(MAX_BODY_BYTES):
                self.close_connection = True
            self._error(e)
        except (BrokenPipeError, ConnectionResetError, TimeoutError, ssl.SSLError):
            self.close_connection = True
        except Exception:
            log.exception("http %s %s failed", self.command, urlsplit(self.path).path)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._error(ApiError(500, "internal error; the advisor's log has the details"))

    def _discard_body(self, limit: int) -> bool:
        """Read and drop a body not read yet, of at most ``limit`` bytes, so that the client, still sending it,
        reads the answer instead of a reset (closing a socket with unread data resets the connection). False
        when it is larger, chunked, of an unreadable length or does not arrive within the server's ``body_timeout``
        (the answer is still sent; the connection is closed after it)."""
        if self._body_read:
            return True
        self._body_read = True
        if self.headers.get("Transfer-Encoding"):
            return False
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return False
        if length <= 0 or length > limit:
            return length == 0
        try:
            got, timed_out = self._read_body(length, None)
        except OSError:
            return False
        return got == length and not timed_out

    def _route(self) -> None:
        for name in SINGLE_HEADERS:  # RFC 9112: more than one is a bad request, never "the first one wins"
            if len(self.headers.get_all(name) or ()) > 1:
                raise ApiError(400, f"more than one {name} header")
        parts = urlsplit(self.path)
        path = parts.path
        if self.web.basic_auth:
            self.user = self.server.web.check_basic_auth(self.web, self.headers.get("Authorization"))
            if self.user is None:
                raise ApiError(
                    401,
                    "authentication required: this advisor is configured with basic auth (--web.config.file)",
                    headers={"WWW-Authenticate": 'Basic realm="capacity-advisor", charset="UTF-8"'},
                )
        for pattern, methods, name in _ROUTES:
            m = pattern.match(path)
            if m is None:
                continue
            allowed = (*methods, "HEAD") if "GET" in methods else methods
            if self.command not in allowed:
                raise ApiError(
                    405,
                    f"method {self.command} not allowed on {path}; allowed: {', '.join(allowed)}",
                    headers={"Allow": ", ".join(allowed)},
                )
            query = parse_qs(parts.query, keep_blank_values=True)
            _refuse_unknown_query(name, query)
            getattr(self, f"_h_{name}")(query=query, **m.groupdict())
            return
        raise ApiError(404, f"no such path: {path}")

    # -- bodies ------------------------------------------------------------------------------------
    def _body(self, model: type[M]) -> M:
        raw, length = self._raw_body()
        return self._json_model(model, raw, length)

    def _raw_body(self) -> tuple[bytes, int]:
        """The body as read (at most :data:`MAX_BODY_BYTES`) and the ``Content-Length`` it announced."""
        if self.headers.get("Transfer-Encoding"):
            raise ApiError(411, "chunked request bodies are not supported: send Content-Length")
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            raise ApiError(411, "a JSON body with Content-Length is required")
        try:
            length = int(length_text)
        except ValueError:
            raise ApiError(400, f"Content-Length is not a number: {length_text[:40]!r}") from None
        if length < 0:
            raise ApiError(400, "Content-Length must not be negative")
        if length > MAX_BODY_BYTES:
            self._discard_body(_DRAIN_LIMIT)
            raise ApiError(413, f"request body of {length:,} bytes is larger than the limit of {MAX_BODY_BYTES:,}")
        self._body_read = True
        kept: list[bytes] = []
        got, timed_out = self._read_body(length, kept)
        if timed_out:
            self.close_connection = True
            raise ApiError(
                408,
                f"the request body did not arrive within {self.server.body_timeout:g}s: {got} of {length} bytes "
                "(Content-Length) came",
            )
        return b"".join(kept), length

    def _read_body(self, length: int, keep: list[bytes] | None) -> tuple[int, bool]:
        """Read up to ``length`` body bytes within the server's ``body_timeout``, appending them to ``keep`` (dropped
        when ``None``). Returns ``(bytes read, timed out)``; fewer bytes without a timeout: the client closed.

        Each read waits at most the time left (the socket's timeout, restored afterwards), and reads what has come
        (``read1``), so a body dripped in never outlasts the deadline; the connection's deadline on the serve loop,
        :data:`BODY_CUT_SLACK` later, is the backstop. Raises :class:`OSError` from the socket (a reset)."""
        deadline = self.server.body_timeout
        end = time.monotonic() + deadline
        self.server._conn_state(waiting=False, timeout=deadline + BODY_CUT_SLACK)
        before = self.connection.gettimeout()
        got = 0
        try:
            while got < length:
                left = end - time.monotonic()
                if left <= 0:
                    return got, True
                self.connection.settimeout(left)
                try:
                    chunk = self.rfile.read1(min(length - got, 65536))
                except TimeoutError:
                    return got, True
                if not chunk:
                    return got, False
                got += len(chunk)
                if keep is not None:
                    keep.append(chunk)
            return got, False
        finally:
            self.server._conn_state(waiting=False, timeout=None)
            with contextlib.suppress(OSError):
                self.connection.settimeout(before)

    def _json_model(self, model: type[M], raw: bytes, length: int) -> M:
        ctype = self.headers.get_content_type()
        charset = (self.headers.get_content_charset() or "utf-8").lower()
        if ctype != "application/json" or charset not in ("utf-8", "utf8"):
            raise ApiError(
                415,
                "the body must be JSON: send Content-Type: application/json "
                f"(got {self.headers.get('Content-Type')!r})",
            )
        if len(raw) < length:
            raise ApiError(400, f"the body ended after {len(raw)} of {length} bytes")

        def no_constants(name: str) -> Any:
            raise ValueError(f"{name} is not valid JSON")

        def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            seen: dict[str, Any] = {}
            for key, value in pairs:
                if key in seen:  # json.loads keeps the last silently; YAML (the config) refuses it
                    raise ValueError(f"key {key!r} is repeated in an object: give it once")
                seen[key] = value
            return seen

        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=no_constants, object_pairs_hook=no_repeats)
        except UnicodeDecodeError:
            raise ApiError(400, "the body is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"the body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, f"the body is not usable JSON: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise ApiError(400, f"the body must be a JSON object, got {type(data).__name__}")
        return self._validate(model, data)

    @staticmethod
    def _validate(model: type[M], data: dict[str, Any]) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            details = validation_details(exc)
            first = details[0] if details else {"path": "", "message": "invalid"}
            where = f" at {first['path']}" if first["path"] else ""
            raise ApiError(
                400,
                f"invalid {model.__name__}: {len(details)} problem(s); first{where}: {first['message']}",
                details,
            ) from None

    def _form(self, raw: bytes, length: int) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body as field → last value."""
        if len(raw) < length:
            raise ApiError(400, f"the body ended after {len(raw)} of {length} bytes")
        try:
            fields = parse_qs(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=16)
        except UnicodeDecodeError:
            raise ApiError(400, "the form body is not UTF-8 text") from None
        except ValueError as exc:
            raise ApiError(400, f"the form body is not usable: {str(exc)[:200]}") from None
        return {k: v[-1] for k, v in fields.items()}

    # -- writes: who, and from where ---------------------------------------------------------------
    def _who(self) -> str:
        """Who makes a write: the basic-auth user, else the client address."""
        return self.user or str(self.client_address[0])

    def _csrf_token(self) -> str:
        """This client's CSRF token (:func:`csrf_token` of its basic-auth user, else its address)."""
        return csrf_token(f"user:{self.user}" if self.user else f"addr:{self.client_address[0]}")

    def _check_origin(self, token: str | None, form: bool) -> None:
        """Refuse a cross-site write (403): it must carry this client's CSRF token or come from this server's
        origin (``Origin``, else ``Referer``, whose host:port is the request's ``Host``). A JSON request with
        neither header is an API client's, not a browser's (a browser sends ``Origin`` with every cross-origin
        POST, and cannot send JSON cross-origin without a preflight this server never grants): allowed.
        ``Origin: null`` (a page with ``Referrer-Policy: no-referrer``, a sandboxed frame) proves nothing."""
        if token and hmac.compare_digest(token.encode(), self._csrf_token().encode()):
            return
        origin = (self.headers.get("Origin") or "").strip()
        referer = (self.headers.get("Referer") or "").strip()
        source = origin if origin and origin != "null" else referer
        host = (self.headers.get("Host") or "").strip().lower()
        if source:
            try:
                claimed = urlsplit(source).netloc.lower()
            except ValueError:
                claimed = ""
            if claimed and claimed == host:
                return
            raise ApiError(
                403,
                f"cross-origin write refused: the request comes from {redact_text(source)[:200]!r}, not from this "
                f"advisor ({host[:200]!r}), and carries no valid CSRF token; use the advisor's own status page",
            )
        if not form and not origin and token is None:
            return
        raise ApiError(
            403,
            "write refused: a snooze or acknowledgement from a form needs the CSRF token of the status page "
            "(field csrf_token, or header X-CSRF-Token) or an Origin/Referer header of this advisor's own address"
            + ("; the token sent is not valid for this client (reload the status page)" if token else ""),
        )

    def _write_body(self, model: type[M]) -> tuple[M, bool]:
        """A snooze or ack body, JSON or form, after :meth:`_check_origin`: ``(body, whether a form sent it)``."""
        raw, length = self._raw_body()
        if self.headers.get_content_type() == _FORM:
            fields = self._form(raw, length)
            token = fields.pop("csrf_token", None)
            self._check_origin(token, form=True)
            return self._validate(model, dict(fields)), True
        self._check_origin(self.headers.get("X-CSRF-Token"), form=False)
        return self._json_model(model, raw, length), False

    # -- handlers ----------------------------------------------------------------------------------
    def _h_status_page(self, query: dict[str, list[str]]) -> None:
        svc = self.server.service
        acks = self.server.acks
        now = time.time()
        refresh = round(min(30.0, max(5.0, svc.cfg.scrape_interval)))
        writable = self.web.basic_auth or not self.server.write_needs_auth
        page = render_status_page(
            svc.result,
            self.server.resolved(),
            lambda rid: acks.get(rid, now),
            refresh,
            csrf_token=self._csrf_token() if writable else None,
            last_reload=getattr(svc, "last_reload", None),
            drift_bound=svc.cfg.data_quality.capacity_model_error_bound,
            runbook_base_url=svc.cfg.runbook_base_url,
        )
        self._send(
            200,
            page.encode(),
            "text/html; charset=utf-8",
            {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Frame-Options": "DENY"},
        )

    def _h_metrics(self, query: dict[str, list[str]]) -> None:
        self._send(200, self.server.metrics_renderer.render(self.server.registry), CONTENT_TYPE_LATEST)

    def _h_healthz(self, query: dict[str, list[str]]) -> None:
        why = self.server.service.unhealthy_reason(time.time())
        body = b"ok\n" if why is None else f"{why}\n".encode()
        self._send(200 if why is None else 503, body, "text/plain; charset=utf-8")

    def _h_readyz(self, query: dict[str, list[str]]) -> None:
        ready = self.server.service.result is not None
        self._send(200 if ready else 503, b"ready\n" if ready else b"no evaluation yet\n", "text/plain; charset=utf-8")

    def _h_openapi(self, query: dict[str, list[str]]) -> None:
        self._send(200, self.server.openapi_bytes(self.web.basic_auth), "application/json")

    @staticmethod
    def _one(query: dict[str, list[str]], key: str) -> str | None:
        """The parameter's one value (``None``: absent). A parameter given twice is refused (400), not read last-wins:
        ``?status=open&status=resolved`` answered ``[]`` with two incidents open (breaker 20)."""
        values = query.get(key)
        if values and len(values) > 1:
            raise ApiError(400, f"query parameter {key[:40]!r} given {len(values)} times: give it once")
        return values[-1] if values else None

    def _result(self) -> tuple[CycleResult | None, float]:
        return self.server.service.result, time.time()

    def _deployment_filter(self, query: dict[str, list[str]], resolved: Sequence[Recommendation] = ()) -> str | None:
        """The ``deployment`` parameter, refused (404, naming the ones there are) when it names no configured
        deployment and no recently resolved recommendation's: ``?deployment=<typo>`` answered 200 with an empty list,
        read as "nothing to do" (breaker 24)."""
        want = self._one(query, "deployment")
        if want is None:
            return None
        known = {d.name for d in self.server.service.cfg.deployments} | {r.deployment for r in resolved}
        if want not in known:
            shown = ", ".join(sorted(known)[:20]) or "none"
            raise ApiError(
                404,
                f"no deployment {want[:128]!r} is configured (configured: {shown})",
                [{"path": "deployment", "message": "not a configured deployment"}],
            )
        return want

    def _h_deployments(self, query: dict[str, list[str]]) -> None:
        res, now = self._result()
        want = self._deployment_filter(query)
        deps = [
            self.server.deployment_dict(d, now)
            for d in (res.deployments if res else ())
            if want is None or d.name == want
        ]
        self._json(200, {"evaluated_at": rfc3339(res.timestamp) if res else None, "deployments": deps})

    def _all_recs(self) -> tuple[CycleResult | None, list[Recommendation], list[Recommendation]]:
        res = self.server.service.result
        open_recs = [r for d in (res.deployments if res else ()) for r in d.recommendations]
        ids = {r.id for r in open_recs}
        resolved = [r for r in self.server.resolved() if r.id not in ids]
        return res, open_recs, resolved

    def _h_recommendations(self, query: dict[str, list[str]]) -> None:
        res, open_recs, resolved = self._all_recs()
        now = time.time()
        want = self._deployment_filter(query, resolved)
        status = self._one(query, "status")
        if status not in (None, "open", "resolved"):
            raise ApiError(
                400,
                f"status must be open or resolved, got {status!r}",
                [{"path": "status", "message": "open or resolved"}],
            )
        out = []
        if status in (None, "open"):
            out += [self.server.rec_dict(r, "open", now) for r in open_recs if want is None or r.deployment == want]
        if status in (None, "resolved"):
            out += [self.server.rec_dict(r, "resolved", now) for r in resolved if want is None or r.deployment == want]
        self._json(200, {"evaluated_at": rfc3339(res.timestamp) if res else None, "recommendations": out})

    def _find(self, rec_id: str) -> tuple[Recommendation, str]:
        _, open_recs, resolved = self._all_recs()
        for r in open_recs:
            if r.id == rec_id:
                return r, "open"
        for r in resolved:
            if r.id == rec_id:
                return r, "resolved"
        raise ApiError(404, f"no open or recently resolved recommendation has id {rec_id[:64]!r}")

    def _h_recommendation(self, query: dict[str, list[str]], id: str) -> None:
        r, status = self._find(id)
        self._json(200, self.server.rec_dict(r, status, time.time()))

    def _write_allowed(self) -> None:
        if not self.web.basic_auth and self.server.write_needs_auth:
            raise ApiError(
                403,
                "snooze and ack change what the advisor notifies, so they need basic auth (basic_auth_users in "
                "--web.config.file) or a loopback listen address (e.g. --listen 127.0.0.1:9188); this advisor "
                f"listens on {self.server.host} without auth",
            )
        if not self.web.basic_auth:
            self._local_host_only()

    def _local_host_only(self) -> None:
        """Refuse (403) a write without auth whose ``Host`` names no local address: writes without auth are allowed
        because only local clients reach a loopback socket, but a web page on a name that DNS rebinding points at
        127.0.0.1 reaches it too, with its own name as ``Host`` and a matching ``Origin`` (and can read the page's
        CSRF token). Allowed: ``localhost`` (and ``*.localhost``), a loopback IP, the host of
        ``--web.external-url``, or no ``Host`` at all (not a browser)."""
        raw = (self.headers.get("Host") or "").strip()
        if not raw:
            return
        try:
            name = (urlsplit("//" + raw).hostname or "").lower()
        except ValueError:
            name = ""
        external = getattr(self.server.service, "external_url", "") or ""
        try:
            external_name = (urlsplit(external).hostname or "").lower() if external else ""
        except ValueError:
            external_name = ""
        if name and (name == "localhost" or name.endswith(".localhost") or is_loopback(name) or name == external_name):
            return
        raise ApiError(
            403,
            f"write refused: Host {redact_text(raw)[:200]!r} is not a local name of this advisor, which takes "
            "writes without auth only from local clients (a DNS-rebound name reaches a loopback socket too); use "
            "localhost, a loopback address or the --web.external-url host, or configure basic auth",
        )

    def _suppress(self, rec_id: str, make: Callable[[Recommendation], Ack], form: bool = False) -> None:
        self._write_allowed()
        r, status = self._find(rec_id)
        if status != "open":
            raise ApiError(
                409,
                f"recommendation {rec_id} resolved at {rfc3339(r.resolved_at or 0)}; there is nothing left to silence",
            )
        try:
            make(r)
            _, open_recs, _ = self._all_recs()
            self.server.acks.prune(x.id for x in open_recs)
        except StateError as exc:
            log.error("cannot persist a snooze/ack: %s", exc)
            raise ApiError(500, f"not saved: {exc}") from None
        if form:  # post/redirect/get: back to the incident on the status page
            self._send(303, b"saved; back to /\n", "text/plain; charset=utf-8", {"Location": f"/#rec-{quote(r.id)}"})
            return
        self._json(200, {"recommendation": self.server.rec_dict(r, "open", time.time())})

    def _h_snooze(self, query: dict[str, list[str]], id: str) -> None:
        self._write_allowed()
        body, form = self._write_body(SnoozeRequest)
        seconds = parse_snooze_duration(body.duration)
        who = self._who()
        self._suppress(id, lambda r: self.server.acks.snooze(r.id, seconds, body.reason, r.deployment, who), form)

    def _h_ack(self, query: dict[str, list[str]], id: str) -> None:
        self._write_allowed()
        body, form = self._write_body(AckRequest)
        who = self._who()
        self._suppress(id, lambda r: self.server.acks.ack(r.id, body.reason, r.deployment, who), form)

    def _h_reload(self, query: dict[str, list[str]]) -> None:
        """``POST /-/reload``: re-read the config as SIGHUP does — only with ``--web.enable-lifecycle``, as
        Prometheus's lifecycle API."""
        hook = self.server.reload_hook
        if hook is None:
            raise ApiError(403, "lifecycle APIs are not enabled: start the advisor with --web.enable-lifecycle")
        self._write_allowed()
        self._check_origin(self.headers.get("X-CSRF-Token"), form=False)
        ok, message = hook()
        if not ok:
            raise ApiError(500, f"reload failed; the running config is kept: {message}")
        self._json(200, {"status": "success", "message": message})

    def _h_plan(self, query: dict[str, list[str]]) -> None:
        req = self._body(PlanRequest)
        self._json(200, plan(req))


_EFFECT_KEYS = (
    "kv_cache_tokens",
    "max_concurrency",
    "kv_cache_blocks",
    "kv_pool_bytes_per_gpu",
    "weights_bytes_per_gpu",
    "overhead_bytes_per_gpu",
    "kv_cache_bytes_per_token",
)


def _field_path(message: str) -> str:
    """The detail path of a capacity-pass error: ``deployment.<field>`` for the first request field the message
    names (``unknown kv_cache_dtype 'nope'`` → ``deployment.kv_cache_dtype``), else ``deployment``. ``model``
    is left out: messages say "the model's …" of the architecture, not of the field."""
    for name in sorted(set(PlanDeployment.model_fields) - {"model"}, key=len, reverse=True):
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", message):
            return f"deployment.{name}"
    return "deployment"


def _plan_answer(
    req: PlanRequest, before: dict[str, Any], after: dict[str, Any] | None, after_error: str | None
) -> dict[str, Any]:
    """The ``POST /api/v1/plan`` answer: ``before``, the ``turn`` asked, ``after`` (``None`` without a turn or when
    it could not be planned, ``after_error`` then saying why) and each of :data:`_EFFECT_KEYS` before → after."""
    effect = {k: {"before": before.get(k), "after": None if after is None else after.get(k)} for k in _EFFECT_KEYS}
    return {
        "before": before,
        "turn": None if req.turn is None else req.turn.model_dump(),
        "after": after,
        "after_error": after_error,
        "effect": effect,
    }


def plan(req: PlanRequest) -> dict[str, Any]:
    """``POST /api/v1/plan``: the capacity pass as ``capacity-advisor plan --json`` prints it, before and after
    the optional dial turn. Model presets and the GPU catalog only: nothing is read from disk or the network.

    Raises:
        ApiError: 400 when the model or GPU is unknown or the deployment cannot run.
    """
    from advisor.capacity.deployment import accounting_engine, resolve_deployment, resolve_gpu, spec_from_settings
    from advisor.capacity.fixes import plan_batch_cap, pool_refusal, verdict
    from advisor.capacity.hardware import tensor_parallel_nodes
    from advisor.capacity.kv import capacity_pass
    from advisor.capacity.models import get_preset, preset_kv_logs
    from advisor.config import budget_key_error, context_problem
    from advisor.rules.turns import FIELD_FOR_DIAL
    from advisor.rules.turns import turned_inputs as turned_by_dial

    dep = req.deployment
    if "gpu_memory_utilization" in dep.model_fields_set:
        # as a config file refuses it: an engine that does not read vLLM's budget (breaker 26: SGLang at 0.5 answered
        # the default fraction's pool, while a turn of the same dial halved it)
        unread = budget_key_error(dep.engine, dep.gpu_memory_utilization)
        if unread is not None:
            raise ApiError(400, unread, [{"path": "deployment.gpu_memory_utilization", "message": unread}])
    try:
        model = get_preset(dep.model)
    except CapacityError as exc:
        raise ApiError(400, str(exc), [{"path": "deployment.model", "message": str(exc)}]) from None
    beyond = context_problem(dep.max_model_len, model)  # as a config file refuses it
    if beyond is not None:
        raise ApiError(400, beyond, [{"path": "deployment.max_model_len", "message": beyond}])
    # the one resolver the daemon, `plan`, `simulate` and the search use: the same GPU, the engine's accounting
    spec = spec_from_settings(
        dep,
        engine=dep.engine,
        model=model,
        gpu_memory_utilization=dep.gpu_memory_utilization if "gpu_memory_utilization" in dep.model_fields_set else None,
        free_gpu_memory_fraction=dep.free_gpu_memory_fraction,
        max_tokens=dep.max_tokens,
    )
    try:
        resolve_gpu(spec.gpu, spec.gpu_memory_bytes)
    except CapacityError as exc:
        raise ApiError(400, str(exc), [{"path": "deployment.gpu", "message": str(exc)}]) from None
    try:
        resolved = resolve_deployment(spec)
        inputs, before = resolved.inputs, resolved.result
    except WontStartError as exc:
        if accounting_engine(spec.engine) == "vllm":  # valid, but vLLM would not start: as `plan --json` says it
            return _plan_refused(req, spec, exc.problem)
        raise ApiError(
            400,
            f"the capacity pass cannot run this deployment: {exc}",
            [{"path": _field_path(str(exc)), "message": str(exc)}],
        ) from None
    except (CapacityError, ValueError, ArithmeticError) as exc:
        raise ApiError(
            400,
            f"the capacity pass cannot run this deployment: {exc}",
            [{"path": _field_path(str(exc)), "message": str(exc)}],
        ) from None
    out_before = before.as_dict()
    plan_batch_cap(out_before, inputs.max_num_seqs, given=spec.max_num_seqs is not None)
    out_before["gpu"] = resolved.gpu.name
    out_before["nvlink_sharp"] = resolved.gpu.nvlink_sharp
    out_before["tensor_parallel_nodes"] = tensor_parallel_nodes(resolved.gpu.part, inputs.tensor_parallel_size)
    kv_logs = preset_kv_logs(model.name)  # a preset: the published start-up logs its KV figures are checked on
    out_before["kv_checked_against_logs"] = None if kv_logs is None else list(kv_logs)
    # "accounting" ({engine, generation, version, reason}) and the weight terms (cpu offload, draft) come with the
    # result, as `plan --json` prints them
    if inputs.engine != "vllm":  # as `plan --engine` prints it
        out_before["engine"] = inputs.engine
    else:  # would vLLM start, and what fits if not: as `plan --json` says it (advisor.capacity.fixes)
        refusal = pool_refusal(before)
        out_before.update(verdict(refusal, [] if refusal is None else _fixes(spec, resolved.gpu)))
    out_after: dict[str, Any] | None = None
    after_error: str | None = None
    if req.turn is not None:
        field_name = FIELD_FOR_DIAL[req.turn.dial]
        try:
            changes: dict[str, Any] = {field_name: req.turn.value}
            if req.turn.dial == "max_model_len" and isinstance(req.turn.value, int):
                turned_beyond = context_problem(req.turn.value, model)
                if turned_beyond is not None:
                    raise CapacityError(turned_beyond)
            spec_fields = {f.name for f in dataclasses.fields(spec)}
            if req.turn.dial != "gpu_memory_utilization" and set(changes) <= spec_fields:
                # the deployment with the dial set, through the one resolver, as if the config said so: the engine's
                # own mapping follows (llama.cpp's --ctx-size from the slots; breaker 26: the turn kept the cells of
                # one slot and answered 8,192 tokens where the deployment with max_num_seqs 4 holds 32,768)
                turned_resolved = resolve_deployment(dataclasses.replace(spec, **changes))
                turned_inputs, after = turned_resolved.inputs, turned_resolved.result
            else:
                turned_inputs = turned_by_dial(inputs, req.turn.dial, req.turn.value)
                after = capacity_pass(turned_inputs)
        except UnknownNameError as exc:  # a value no engine has, not a deployment that cannot run (walkthrough: fp9)
            raise ApiError(400, f"turn.value: {exc}", [{"path": "turn.value", "message": str(exc)}]) from None
        except (CapacityError, ValueError, ArithmeticError) as exc:
            after_error = f"with {req.turn.dial} = {req.turn.value!r} the deployment cannot run: {exc}"
        else:
            out_after = after.as_dict()
            plan_batch_cap(
                out_after, turned_inputs.max_num_seqs, given=spec.max_num_seqs is not None or "max_num_seqs" in changes
            )
            out_after["gpu"] = out_before["gpu"]
            out_after["nvlink_sharp"] = out_before["nvlink_sharp"]
            tp_after = turned_inputs.tensor_parallel_size
            out_after["tensor_parallel_nodes"] = tensor_parallel_nodes(resolved.gpu.part, tp_after)
            out_after["kv_checked_against_logs"] = out_before["kv_checked_against_logs"]
            if "engine" in out_before:
                out_after["engine"] = out_before["engine"]
            else:
                refusal = pool_refusal(after)
                turned = {f.name for f in dataclasses.fields(spec)}
                found = (
                    _fixes(dataclasses.replace(spec, **changes), resolved.gpu)
                    if refusal is not None and set(changes) <= turned
                    else []
                )
                out_after.update(verdict(refusal, found))
    return _plan_answer(req, out_before, out_after, after_error)


def _fixes(spec: Any, gpu: Any) -> list[dict[str, Any]]:
    """:func:`advisor.capacity.fixes.fixes` with the engine's own flag beside each (``engine_flag``), as ``plan
    --json`` gives them."""
    from advisor.capacity.deployment import accounting_engine
    from advisor.capacity.fixes import fixes
    from advisor.engines.flags import fix_engine_flags

    return fix_engine_flags(fixes(spec, gpu), accounting_engine(spec.engine))


def _plan_refused(req: PlanRequest, spec: Any, reason: str) -> dict[str, Any]:
    """``POST /api/v1/plan`` for a deployment the capacity pass refuses as the engine would (vLLM's accounting:
    the weights leave no room, or nothing is left for the KV cache: :class:`~advisor.errors.WontStartError`): 200
    with ``before`` as
    ``plan --json`` prints it (``model``, ``gpu``, ``feasible: false``, ``reason``, ``fixes``) and the optional
    turn planned from the stated deployment with the dial changed (the one resolver,
    :func:`advisor.capacity.deployment.resolve_deployment`)."""
    from advisor.capacity.deployment import accounting_engine, resolve_deployment, resolve_gpu
    from advisor.capacity.fixes import plan_batch_cap, pool_refusal, verdict
    from advisor.capacity.hardware import tensor_parallel_nodes
    from advisor.capacity.models import preset_kv_logs
    from advisor.config import context_problem
    from advisor.rules.turns import FIELD_FOR_DIAL

    gpu = resolve_gpu(spec.gpu, spec.gpu_memory_bytes)
    engine = accounting_engine(spec.engine)
    out_before: dict[str, Any] = {
        "model": spec.model.name,
        "gpu": gpu.name,
        **verdict(reason, _fixes(spec, gpu), engine),
    }
    out_after: dict[str, Any] | None = None
    after_error: str | None = None
    if req.turn is not None:
        changes: dict[str, Any] = {FIELD_FOR_DIAL[req.turn.dial]: req.turn.value}
        try:
            if req.turn.dial == "max_model_len" and isinstance(req.turn.value, int):
                turned_beyond = context_problem(req.turn.value, spec.model)
                if turned_beyond is not None:
                    raise CapacityError(turned_beyond)
            turned = dataclasses.replace(spec, **changes)
            resolved = resolve_deployment(turned)
        except UnknownNameError as exc:  # a value no engine has: bad input, as on the deployment's own field
            raise ApiError(400, f"turn.value: {exc}", [{"path": "turn.value", "message": str(exc)}]) from None
        except (CapacityError, ValueError, ArithmeticError) as exc:
            after_error = f"with {req.turn.dial} = {req.turn.value!r} the deployment cannot run: {exc}"
        else:
            after = resolved.result
            out_after = after.as_dict()
            plan_batch_cap(out_after, resolved.inputs.max_num_seqs, given=turned.max_num_seqs is not None)
            out_after["gpu"] = resolved.gpu.name
            out_after["nvlink_sharp"] = resolved.gpu.nvlink_sharp
            tp_after = resolved.inputs.tensor_parallel_size
            out_after["tensor_parallel_nodes"] = tensor_parallel_nodes(resolved.gpu.part, tp_after)
            kv_logs = preset_kv_logs(spec.model.name)
            out_after["kv_checked_against_logs"] = None if kv_logs is None else list(kv_logs)
            refusal = pool_refusal(after)
            out_after.update(verdict(refusal, [] if refusal is None else _fixes(turned, resolved.gpu)))
    return _plan_answer(req, out_before, out_after, after_error)
