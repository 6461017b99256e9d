"""One thread that scrapes every plain-``http://`` target on its keep-alive connection, then observes each page.

:class:`ScrapeLoop` is the daemon's scrape path with in-process workers (``run --workers 1``): a job whose target's
transport is a :class:`~advisor.http_edge.PooledTransport` on a plain ``http://`` URL (no proxy, no TLS: decided by
:func:`~advisor.http_edge.target_transport` once per target) is driven by one thread over non-blocking sockets
(:mod:`selectors`), its request precomputed once per target (:meth:`PooledTransport.plain_get`, the exact bytes
``http.client`` sends), and its page observed in that thread as soon as it is complete
(:func:`advisor.collect.observe_page`, under collect's one-parser lock)::

    submit(job) ──▶ loop thread: send ─▶ head ─▶ body ─▶ scrape_outcome ─▶ observe_page ─▶ Future
                        │ a new connection: made on a worker (PooledTransport's own connect, DNS included)
                        └ anything else: collect(job, transport) on a worker, unchanged

Why (issue 15): at 1,000 targets a 32-thread pool of :func:`advisor.collect.collect` cost ~1.1–1.5 ms of CPU per
target per cycle, this loop ~0.6–0.7 ms (the same jobs alternated cycle by cycle against ``bench/fleet.py``'s
stand-ins; the service in process, ``bench/fleet.py --baseline``: 2.26 → 1.23 ms per target at 1,000): no GIL
hand-offs between 32 threads, no ``http.client`` response object per request.

The edge policy is :class:`~advisor.http_edge.PooledTransport`'s, with the same
:class:`~advisor.http_edge.EdgeError` classes and messages: one deadline (``connect_timeout + read_timeout`` from
the scrape's start: when the loop takes the job, or when its connect starts on a worker), a stall longer than
``read_timeout`` between reads, ``Content-Length`` over ``max_bytes`` refused before reading, the decoded body
capped (``gzip``/``deflate`` by the same bounded decoder), chunked bodies read as ``http.client`` reads them, a
body without framing read until the server closes, HTTP/1.0 keep-alive decided as ``http.client`` decides it, at
most :data:`~advisor.sources.scrape.ERROR_BODY_BYTES` of a non-2xx body, a reused connection the server had closed
(before any answer) asked again once on a new one, an idle connection the server closed or wrote on replaced.

What the loop does not read itself goes through the target's transport on a worker
(:func:`advisor.collect.collect`, so the result is the transport's): a redirect (3xx with ``Location``), 1xx, 204,
304, a version other than ``HTTP/1.x``, a head over 64 KiB or 100 header lines or one the loop does not parse (bare
LF line ends, an obsolete line fold, a repeated framing header), a negative chunk size, a head cut short. Such a
target is then scraped through its transport from then on. The first such scrape asks the server twice; its
``duration_seconds`` counts both.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Final, Protocol

from advisor.collect import Collected, CollectJob, collect, observe_page
from advisor.http_edge import (
    _STALE_ERRORS,
    CHUNK_BYTES,
    EdgeConnectionError,
    EdgeDecodeError,
    EdgeError,
    EdgeLimits,
    EdgeResponse,
    EdgeTimeoutError,
    EdgeTooLargeError,
    PooledTransport,
    Transport,
    _decoder_for,
    _Inflate,
    declared_length,
    is_refused,
)
from advisor.sources.scrape import ACCEPT_HEADER, ERROR_BODY_BYTES, scrape_outcome

log = logging.getLogger(__name__)

__all__ = ["ScrapeLoop"]

_MAXLINE: Final = 65536
"""``http.client._MAXLINE``: a longer head line, chunk-size line or trailer line is an error there."""
_MAXHEAD: Final = 65536
"""A head longer than this (bytes) is left to the transport."""
_MAXHEADERS: Final = 100
"""``http.client._MAXHEADERS``."""
_READ_HEADERS: Final = frozenset(
    {
        "content-length",
        "transfer-encoding",
        "content-encoding",
        "connection",
        "location",
        "keep-alive",
        "proxy-connection",
    }
)
"""The response headers the loop reads (a repeated one is left to the transport)."""

# phases of a scrape
_CONNECT, _SEND, _HEAD, _BODY, _SIZE, _DATA, _CRLF, _TRAILER, _UNTIL, _DONE = range(10)

Result = tuple[Collected, float]


def _readable(sock: socket.socket) -> bool:
    """Whether the non-blocking ``sock`` has bytes, an end of stream or an error to read now, without waiting or
    consuming anything (a peek: any descriptor number, unlike ``select.select``)."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:  # a reset or the like: the read reports it
        return True
    return True


class Workers(Protocol):
    """Where connects and the transport's scrapes run (:class:`advisor.service.WorkerPool`)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on a worker."""
        ...


class _TransportsError(Exception):
    """A response the loop does not read itself: the scrape goes through the transport."""


class _Slot:
    """One target: its connection and its request, and the state of the scrape in flight."""

    __slots__ = (
        "addr",
        "buf",
        "chunk_left",
        "deadline",
        "decoder",
        "fallback",
        "future",
        "gen",
        "head_bytes",
        "job",
        "keep",
        "key",
        "last_io",
        "left",
        "limits",
        "out",
        "parts",
        "phase",
        "reason",
        "request",
        "reused",
        "sock",
        "start",
        "status",
        "total",
        "transport",
        "workers",
    )

    def __init__(self, key: Hashable, transport: Transport, url: str) -> None:
        self.key = key
        self.transport = transport
        self.sock: socket.socket | None = None
        self.gen = 0
        plain = transport.plain_get(url, {"Accept": ACCEPT_HEADER}) if isinstance(transport, PooledTransport) else None
        self.fallback = plain is None
        self.addr, self.request = plain if plain is not None else (("", 0), b"")
        self.job: CollectJob | None = None
        self.future: Future[Result] | None = None
        self.workers: Workers | None = None
        self.phase = _DONE
        self.limits = EdgeLimits(0.0, 0.0, 0)
        self.start = self.deadline = self.last_io = 0.0
        self.reused = self.keep = False
        self.out = self.buf = b""
        self.status, self.reason = 0, ""
        self.left = self.chunk_left = self.total = 0
        self.parts: list[bytes] = []
        self.decoder: _Inflate | None = None


class ScrapeLoop:
    """The scrape thread (see the module docstring). :meth:`submit` from any thread; :meth:`close` to stop.

    Args:
        clock: stamps each result when it is handed on (unix seconds; :attr:`advisor.service.Service.clock`).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._waking = False
        self._inbox: deque[tuple[Any, ...]] = deque()
        self._slots: dict[Hashable, _Slot] = {}
        self._timers: list[tuple[float, int, _Slot, int]] = []
        self._seq = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="scrape-loop", daemon=True)
        self._thread.start()

    # -- the caller's side --------------------------------------------------------------------------------------

    def submit(self, key: Hashable, job: CollectJob, transport: Transport, workers: Workers) -> Future[Result]:
        """Scrape and observe ``job`` (target ``key``, whose transport is ``transport``); the future holds its
        :class:`~advisor.collect.Collected` and the clock's time when it was handed on, as
        ``WorkerPool.submit(lambda: (collect(job, transport), clock()))`` would. ``workers`` run its connects and
        whatever the loop leaves to the transport.

        Raises:
            RuntimeError: the loop was closed.
        """
        if self._closed:
            raise RuntimeError("the scrape loop is closed")
        f: Future[Result] = Future()
        self._post(("job", key, job, transport, workers, f))
        return f

    def retain(self, keys: Iterable[Hashable]) -> None:
        """Close the connections of the targets not in ``keys`` (a scrape in flight of one ends first)."""
        self._post(("retain", frozenset(keys)))

    def close(self) -> None:
        """Stop the thread and close every connection; a scrape in flight is abandoned (its future never ends)."""
        if not self._closed:
            self._closed = True
            self._post(("close",))
            if threading.current_thread() is not self._thread:
                self._thread.join(5)

    def _post(self, item: tuple[Any, ...]) -> None:
        self._inbox.append(item)
        if not self._waking:  # the loop clears the flag before it empties the inbox
            self._waking = True
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    # -- the loop's side ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        sel, timers = self._sel, self._timers
        while True:
            timeout: float | None = None
            if timers:
                timeout = max(0.0, timers[0][0] - time.monotonic())
            for key, _ in sel.select(timeout):
                slot = key.data
                if slot is None:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                try:
                    self._io(slot)
                except Exception:  # a bug must end this scrape, never the loop
                    log.exception("scrape loop: failed on a target")
                    self._end_error(slot, EdgeConnectionError("request failed (internal error)"))
            self._waking = False
            inbox = self._inbox
            while inbox:
                item = inbox.popleft()
                if item[0] == "close":
                    self._shutdown()
                    return
                try:
                    self._take(item)
                except Exception:
                    log.exception("scrape loop: failed to start a scrape")
            if timers:
                self._expire(time.monotonic())

    def _shutdown(self) -> None:
        for slot in self._slots.values():
            self._drop(slot)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def _take(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "retain":
            keep: frozenset[Hashable] = item[1]
            for key in [k for k in self._slots if k not in keep]:
                slot = self._slots.pop(key)
                if slot.phase in (_DONE, _CONNECT):  # one in flight closes its socket when it ends
                    self._drop(slot)
        elif kind == "job":
            _, key, job, transport, workers, future = item
            self._start(key, job, transport, workers, future)
        elif kind == "connected":
            self._connected(*item[1:])

    def _start(
        self, key: Hashable, job: CollectJob, transport: Transport, workers: Workers, future: Future[Result]
    ) -> None:
        if not future.set_running_or_notify_cancel():
            return
        slot = self._slots.get(key)
        if slot is None or slot.transport is not transport:
            if slot is not None:
                self._drop(slot)
            slot = self._slots[key] = _Slot(key, transport, job.url)
        if slot.fallback or slot.phase != _DONE:  # not ours, or (never, from the service) one in flight already
            self._run_transport(job, transport, workers, future, 0.0)
            return
        slot.job, slot.future, slot.workers = job, future, workers
        slot.limits = EdgeLimits(job.connect_timeout, job.read_timeout, job.max_bytes)
        if slot.sock is not None:  # an idle keep-alive connection the server has not closed (see _io)
            slot.start = time.monotonic()
            slot.deadline = slot.start + slot.limits.total_seconds
            slot.reused = True
            self._send(slot)
        else:
            slot.start = 0.0  # set by the connect, when it starts on a worker
            slot.reused = False
            self._connect(slot, None)

    # connect: PooledTransport's own, on a worker (DNS, addresses tried in turn, timeouts, messages)

    def _connect(self, slot: _Slot, deadline: float | None) -> None:
        slot.phase = _CONNECT
        slot.gen += 1
        gen = slot.gen
        transport, limits, addr = slot.transport, slot.limits, slot.addr

        def connect() -> None:
            sock: socket.socket | None = None
            error: EdgeError | None = None
            start = time.monotonic()
            until = deadline if deadline is not None else start + limits.total_seconds
            try:
                assert isinstance(transport, PooledTransport)
                conn = transport._connect(("http", addr[0], addr[1]), limits, until)
                wrapped: Any = conn.sock  # a _DeadlineSocket around the connected socket
                sock = wrapped._sock
                conn.sock = None  # the socket is the loop's now (not closed with the connection object)
            except EdgeError as exc:
                error = exc
            self._post(("connected", slot, gen, sock, error, start, until))

        self._in_worker(slot.workers, connect)

    def _in_worker(self, workers: Workers | None, fn: Callable[[], None]) -> None:
        try:
            if workers is None:
                raise RuntimeError
            workers.submit(fn)
        except RuntimeError:  # the pool was shut down (a reload replaced it): a thread of its own
            threading.Thread(target=fn, name="scrape-loop-aside", daemon=True).start()

    def _run_transport(
        self, job: CollectJob, transport: Transport, workers: Workers | None, future: Future[Result], spent: float
    ) -> None:
        """Scrape ``job`` through its transport on a worker (``spent``: seconds this scrape already took here)."""
        clock = self._clock

        def run() -> None:
            try:
                res = collect(job, transport)
                if spent:
                    res = replace(res, duration_seconds=res.duration_seconds + spent)
                future.set_result((res, clock()))
            except BaseException as exc:  # the future carries it, as WorkerPool's would
                future.set_exception(exc)

        self._in_worker(workers, run)

    # timers: one entry per slot at a time, pushed again when it fires early

    def _arm(self, slot: _Slot) -> None:
        when = min(slot.deadline, slot.last_io + slot.limits.read_timeout)
        heapq.heappush(self._timers, (when, next(self._seq), slot, slot.gen))

    def _expire(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, slot, gen = heapq.heappop(timers)
            if gen != slot.gen or slot.phase in (_DONE, _CONNECT):
                continue
            if now >= slot.deadline:
                self._timeout(slot, late=True)
            elif now >= slot.last_io + slot.limits.read_timeout:
                if slot.sock is not None and _readable(slot.sock):
                    # bytes (or the server's close) waited while this thread was busy (observing other pages):
                    # the transport's own thread would have found them in its socket, so no stall — read them
                    self._io(slot)
                    if slot.gen == gen and slot.phase not in (_DONE, _CONNECT):
                        self._arm(slot)
                else:
                    self._timeout(slot, late=now >= slot.deadline - 0.005)
            else:
                self._arm(slot)

    def _timeout(self, slot: _Slot, late: bool) -> None:
        limits = slot.limits
        if slot.phase in (_SEND, _HEAD):
            if late:
                msg = f"no response headers within the deadline of {limits.total_seconds:g}s"
            else:
                msg = f"no response headers within read timeout {limits.read_timeout:g}s"
            self._end_error(slot, EdgeTimeoutError(msg))
        elif not 200 <= slot.status < 300:
            self._end_body(slot, complete=False)  # best effort: what came of the error body
        elif late:
            self._end_error(
                slot,
                EdgeTimeoutError(f"body not complete within the deadline of {limits.total_seconds:g}s", slot.status),
            )
        else:
            self._end_error(
                slot, EdgeTimeoutError(f"body read stalled longer than {limits.read_timeout:g}s", slot.status)
            )

    def _connected(
        self, slot: _Slot, gen: int, sock: socket.socket | None, error: EdgeError | None, start: float, until: float
    ) -> None:
        if gen != slot.gen or slot.job is None:  # dropped meanwhile
            if sock is not None:
                sock.close()
            return
        if not slot.start:  # a first connect starts the scrape, as a worker taking it would; a retry keeps it
            slot.start, slot.deadline = start, until
        if error is not None or sock is None:
            self._end_error(slot, error or EdgeConnectionError("request failed (internal error)"))
            return
        sock.setblocking(False)
        slot.sock = sock
        self._sel.register(sock, selectors.EVENT_READ, slot)
        self._send(slot)

    def _send(self, slot: _Slot) -> None:
        slot.phase = _SEND
        slot.gen += 1
        slot.buf = b""
        slot.last_io = time.monotonic()
        slot.out = slot.request
        self._arm(slot)
        self._write(slot)

    def _write(self, slot: _Slot) -> None:
        sock = slot.sock
        assert sock is not None
        try:
            n = sock.send(slot.out)
        except BlockingIOError:
            n = 0
        except OSError as exc:
            self._head_error(slot, exc)
            return
        slot.out = slot.out[n:]
        if slot.out:
            self._sel.modify(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, slot)
            return
        if n and len(slot.request) != n:  # the rest went after a write event: back to reading only
            self._sel.modify(sock, selectors.EVENT_READ, slot)
        if slot.phase == _SEND:
            slot.phase = _HEAD

    # reading

    def _io(self, slot: _Slot) -> None:
        sock = slot.sock
        if sock is None:
            return
        phase = slot.phase
        if phase == _DONE:  # an idle connection the server closed or wrote on: not reused (as _checkout)
            self._close_sock(slot)
            return
        if phase == _SEND and slot.out:
            self._write(slot)
            if slot.phase == _SEND or slot.sock is None:
                return
        now = time.monotonic()
        if slot.deadline - now <= 0:
            self._timeout(slot, late=True)
            return
        try:
            data = sock.recv(CHUNK_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            if slot.phase in (_SEND, _HEAD):
                self._head_error(slot, exc)
            else:
                self._body_error(
                    slot, EdgeConnectionError(f"connection lost while reading body ({type(exc).__name__})", slot.status)
                )
            return
        slot.last_io = now
        try:
            if not data:
                self._eof(slot)
            elif slot.phase in (_SEND, _HEAD):
                self._head_data(slot, data)
            else:
                self._feed(slot, data)
        except _TransportsError:
            self._fallback(slot)
        except EdgeError as exc:
            self._body_error(slot, exc)

    def _head_error(self, slot: _Slot, exc: OSError) -> None:
        """A failure sending the request or before the head was complete (as PooledTransport._exchange)."""
        self._close_sock(slot)
        if slot.reused and isinstance(exc, _STALE_ERRORS) and slot.deadline - time.monotonic() > 0:
            slot.reused = False
            self._connect(slot, slot.deadline)
            return
        if is_refused(exc):
            self._end_error(slot, EdgeConnectionError("connection refused"))
        else:
            self._end_error(slot, EdgeConnectionError(f"connection failed ({type(exc).__name__})"))

    def _body_error(self, slot: _Slot, exc: EdgeError) -> None:
        if slot.phase in (_SEND, _HEAD) or 200 <= slot.status < 300:
            self._end_error(slot, exc)
        else:
            self._end_body(slot, complete=False)  # best effort: the status is the error

    def _eof(self, slot: _Slot) -> None:
        phase = slot.phase
        self._close_sock(slot)
        if phase in (_SEND, _HEAD):
            if slot.buf:  # a head cut short: the transport says what it makes of it
                raise _TransportsError
            if slot.reused and slot.deadline - time.monotonic() > 0:
                slot.reused = False
                self._connect(slot, slot.deadline)
                return
            self._end_error(slot, EdgeConnectionError("connection failed (RemoteDisconnected)"))
            return
        if phase in (_TRAILER, _UNTIL) or (phase == _SIZE and _chunk_size(slot.buf) == 0):
            self._end_body(slot, complete=True)
            return
        self._body_error(slot, EdgeConnectionError("connection lost while reading body (IncompleteRead)", slot.status))

    def _head_data(self, slot: _Slot, data: bytes) -> None:
        buf = slot.buf + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAXHEAD or b"\n\n" in buf or buf.count(b"\n") != buf.count(b"\r\n"):
                raise _TransportsError  # too long, or bare LF line ends: the transport's
            slot.buf = buf
            return
        if end > _MAXHEAD:
            raise _TransportsError
        slot.buf = b""
        self._head(slot, buf[:end])
        rest = buf[end + 4 :]
        if slot.phase == _DONE:
            return
        if rest:
            self._feed(slot, rest)
        elif slot.phase == _BODY and slot.left == 0:
            self._end_body(slot, complete=True)

    def _head(self, slot: _Slot, head: bytes) -> None:
        """Read the status line and the headers the edge policy needs; raise :class:`_TransportsError` for anything the
        loop leaves to the transport."""
        lines = head.decode("latin-1").split("\r\n")
        if len(lines) - 1 > _MAXHEADERS or "\n" in head.decode("latin-1").replace("\r\n", ""):
            raise _TransportsError
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
            raise _TransportsError
        http10 = parts[0] == "HTTP/1.0"
        status = int(parts[1])
        if status < 200 or status in (204, 304):
            raise _TransportsError
        seen: dict[str, str] = {}
        for line in lines[1:]:
            if not line or line[0] in " \t":
                raise _TransportsError  # an obsolete line fold
            name, sep, value = line.partition(":")
            if not sep:
                raise _TransportsError
            lname = name.lower()
            if lname in _READ_HEADERS:
                if lname in seen or name != name.strip():
                    raise _TransportsError
                seen[lname] = value.lstrip(" \t")
        if 300 <= status < 400 and "location" in seen:
            raise _TransportsError  # a redirect: followed by the transport
        chunked = False
        if "transfer-encoding" in seen:
            if seen["transfer-encoding"].lower() != "chunked":
                raise _TransportsError
            chunked = True
        length: int | None = None
        raw_length = seen.get("content-length")
        if raw_length and not chunked:
            try:
                length = int(raw_length)
            except ValueError:
                length = None
            if length is not None and length < 0:
                length = None
        slot.status = status
        slot.reason = parts[2].strip() if len(parts) > 2 else ""
        connection = seen.get("connection", "").lower()
        if http10:  # http.client's _check_close for HTTP/1.0
            slot.keep = bool(
                seen.get("keep-alive")
                or "keep-alive" in connection
                or "keep-alive" in seen.get("proxy-connection", "").lower()
            )
        else:
            slot.keep = "close" not in connection
        if not chunked and length is None:
            slot.keep = False  # no framing: the body ends when the server closes
        slot.parts = []
        slot.total = 0
        slot.decoder = None
        if 200 <= status < 300:
            declared = declared_length(raw_length)
            if declared is not None and declared > slot.limits.max_bytes:
                raise EdgeTooLargeError(
                    f"Content-Length {declared} bytes exceeds the cap of {slot.limits.max_bytes} bytes", status
                )
            slot.decoder = _decoder_for(seen.get("content-encoding"))  # EdgeDecodeError without a status, as there
        else:
            try:
                slot.decoder = _decoder_for(seen.get("content-encoding"))
            except EdgeError:
                slot.phase = _BODY
                self._end_body(slot, complete=False)
                return
        if chunked:
            slot.phase, slot.chunk_left = _SIZE, 0
        elif length is None:
            slot.phase = _UNTIL
        else:
            slot.phase, slot.left = _BODY, length

    def _feed(self, slot: _Slot, data: bytes) -> None:
        """Body bytes: framed (Content-Length or chunked, as http.client reads them), decoded and counted."""
        if slot.phase == _UNTIL:
            self._chunk(slot, data)
            return
        if slot.phase == _BODY:
            take = data[: slot.left]
            slot.left -= len(take)
            if len(take) != len(data):
                slot.keep = False  # bytes past the answer: the connection is not reused
            self._chunk(slot, take)
            if slot.phase == _BODY and slot.left == 0:
                self._end_body(slot, complete=True)
            return
        buf = slot.buf + data if slot.buf else data
        pos, end, status = 0, len(buf), slot.status
        while slot.phase not in (_DONE, _BODY, _UNTIL):
            phase = slot.phase
            if phase in (_SIZE, _TRAILER):
                nl = buf.find(b"\n", pos, pos + _MAXLINE + 1)
                if nl < 0:
                    if end - pos > _MAXLINE:
                        raise EdgeConnectionError("connection lost while reading body (LineTooLong)", status)
                    break
                line, pos = buf[pos : nl + 1], nl + 1
                if phase == _TRAILER:
                    if line in (b"\r\n", b"\n"):
                        if pos != end:
                            slot.keep = False
                        slot.buf = b""
                        self._end_body(slot, complete=True)
                        return
                    continue
                size = _chunk_size(line)
                if size is None:
                    raise EdgeConnectionError("connection lost while reading body (IncompleteRead)", status)
                if size < 0:
                    raise _TransportsError
                if size == 0:
                    slot.phase = _TRAILER
                else:
                    slot.phase, slot.chunk_left = _DATA, size
            elif phase == _DATA:
                n = min(slot.chunk_left, end - pos)
                if n == 0:
                    break
                piece = buf[pos : pos + n]
                pos += n
                slot.chunk_left -= n
                if slot.chunk_left == 0:
                    slot.phase, slot.chunk_left = _CRLF, 2
                self._chunk(slot, piece)
            else:  # _CRLF: two bytes after a chunk's data, skipped unread (http.client's _safe_read(2))
                n = min(slot.chunk_left, end - pos)
                if n == 0:
                    break
                pos += n
                slot.chunk_left -= n
                if slot.chunk_left == 0:
                    slot.phase = _SIZE
        if slot.phase != _DONE:
            slot.buf = buf[pos:]

    def _chunk(self, slot: _Slot, raw: bytes) -> None:
        """Decode and count one piece of body (the cap, or the error body's first bytes)."""
        if not raw:
            return
        decoder = slot.decoder
        if 200 <= slot.status < 300:
            cap = slot.limits.max_bytes
            try:
                piece = raw if decoder is None else decoder.decode(raw, cap - slot.total + 1)
            except zlib.error:
                raise EdgeDecodeError("body could not be decoded (Content-Encoding)", slot.status) from None
            slot.total += len(piece)
            if slot.total > cap:
                raise EdgeTooLargeError(f"body exceeds the cap of {cap} bytes", slot.status)
            slot.parts.append(piece)
            return
        room = ERROR_BODY_BYTES - slot.total
        try:
            piece = raw[:room] if decoder is None else decoder.decode(raw, room)
        except zlib.error:
            self._end_body(slot, complete=False)
            return
        slot.total += len(piece)
        slot.parts.append(piece)
        if slot.total >= ERROR_BODY_BYTES:
            self._end_body(slot, complete=False)

    # ending a scrape

    def _end_body(self, slot: _Slot, complete: bool) -> None:
        answer = EdgeResponse(slot.status, slot.reason, {}, b"".join(slot.parts))
        slot.parts = []
        self._finish(slot, answer, keep=complete and slot.keep)

    def _end_error(self, slot: _Slot, error: EdgeError) -> None:
        self._finish(slot, error, keep=False)

    def _finish(self, slot: _Slot, answer: EdgeResponse | EdgeError, keep: bool) -> None:
        job, future = slot.job, slot.future
        slot.phase = _DONE
        slot.gen += 1
        slot.job = slot.future = slot.workers = None
        slot.decoder = None
        slot.buf = b""
        if not keep or self._slots.get(slot.key) is not slot:
            self._close_sock(slot)
        if job is None or future is None:
            return
        try:
            res = observe_page(job, scrape_outcome(job.url, slot.start, answer, job.sample_limit))
        except BaseException as exc:  # observe_page never raises; the future carries anything else
            future.set_exception(exc)
            return
        future.set_result((res, self._clock()))

    def _fallback(self, slot: _Slot) -> None:
        job, future, workers = slot.job, slot.future, slot.workers
        self._close_sock(slot)
        slot.fallback = True  # this target is scraped through its transport from now on
        slot.phase = _DONE
        slot.gen += 1
        slot.job = slot.future = slot.workers = None
        slot.parts, slot.buf = [], b""
        if job is not None and future is not None:
            self._run_transport(job, slot.transport, workers, future, time.monotonic() - slot.start)

    def _close_sock(self, slot: _Slot) -> None:
        sock, slot.sock = slot.sock, None
        if sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
            sock.close()

    def _drop(self, slot: _Slot) -> None:
        self._close_sock(slot)
        slot.gen += 1


def _chunk_size(line: bytes) -> int | None:
    """A chunk-size line's value as ``http.client`` reads it (extensions cut, ``int(line, 16)``), ``None`` when it
    does not read."""
    i = line.find(b";")
    if i >= 0:
        line = line[:i]
    try:
        return int(line, 16)
    except ValueError:
        return None
