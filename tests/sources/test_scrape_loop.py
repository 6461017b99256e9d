"""The scrape loop (advisor.scrape_loop) gives what collect() over the target's transport gives, on real servers.

Each case runs a raw loopback server and scrapes it both ways — ``collect(job, target_transport(url))`` on this thread
and ``ScrapeLoop.submit`` — and asserts the same :class:`~advisor.collect.Collected` (every field but the duration).
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from advisor.collect import Collected, CollectJob, collect
from advisor.http_edge import target_transport
from advisor.scrape_loop import ScrapeLoop
from advisor.sources.scrape import ACCEPT_HEADER

CAPTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "engine-metrics"
PAGE_FILE = CAPTURE / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"

Handler = Callable[[socket.socket, "RawServer"], None]


def read_request(conn: socket.socket) -> bytes | None:
    """One request head from ``conn`` (``None`` when the client closed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = conn.recv(65536)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


class RawServer:
    """A loopback server on port 0 whose every connection is handled by ``handler`` on a thread of its own."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/metrics", userinfo: str = "") -> str:
        return f"http://{userinfo}127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.handler(conn, self)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()
        for c in self._open:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()


def answer(body: bytes, status: str = "200 OK", headers: tuple[str, ...] = ()) -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: text/plain; version=0.0.4", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(body: bytes, size: int = 4000) -> bytes:
    out = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size))
    return out + b"0\r\n\r\n"


def keep_alive(make: Callable[[bytes, RawServer], bytes | None]) -> Handler:
    """A handler answering every request on the connection with ``make(request, server)`` (``None``: close)."""

    def handle(conn: socket.socket, server: RawServer) -> None:
        while True:
            req = read_request(conn)
            if req is None:
                return
            server.requests.append(req)
            out = make(req, server)
            if out is None:
                return
            conn.sendall(out)

    return handle


@pytest.fixture(scope="module")
def page() -> bytes:
    if not PAGE_FILE.exists():
        pytest.skip(f"{PAGE_FILE} is absent")
    return PAGE_FILE.read_bytes()


@pytest.fixture
def loop() -> Iterator[ScrapeLoop]:
    lp = ScrapeLoop(time.time)
    yield lp
    lp.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(4)
    yield pool
    pool.shutdown(wait=False)


def job(url: str, connect: float = 2.0, read: float = 3.0, max_bytes: int = 10_000_000, samples: int = 0) -> CollectJob:
    return CollectJob("d", url, "vllm", None, None, connect, read, max_bytes, samples, 0)


def fields(c: Collected) -> tuple[object, ...]:
    """Every field but the duration."""
    return (c.ok, c.snapshot, c.engine, c.error_reason, c.error_message, c.duplicate_series, c.status_code)


def both(
    handler: Handler, loop: ScrapeLoop, workers: ThreadPoolExecutor, times: int = 1, **kw: object
) -> tuple[list[Collected], list[Collected], RawServer, RawServer]:
    """Scrape a fresh server ``times`` with each path: (transport results, loop results, servers)."""
    a_server, b_server = RawServer(handler), RawServer(handler)
    try:
        url_a, url_b = a_server.url(), b_server.url()
        if "userinfo" in kw:
            url_a, url_b = a_server.url(userinfo=str(kw.pop("userinfo"))), b_server.url(userinfo=str(kw["userinfo2"]))
            kw.pop("userinfo2")
        transport_a, transport_b = target_transport(url_a), target_transport(url_b)
        try:
            a = [collect(job(url_a, **kw), transport_a) for _ in range(times)]  # type: ignore[arg-type]
            b = [
                loop.submit("t", job(url_b, **kw), transport_b, workers).result(30)[0]  # type: ignore[arg-type]
                for _ in range(times)
            ]
        finally:
            transport_a.close()
            transport_b.close()
        return a, b, a_server, b_server
    finally:
        a_server.close()
        b_server.close()


def assert_same(a: list[Collected], b: list[Collected]) -> None:
    assert [fields(x) for x in b] == [fields(x) for x in a]
    for x in b:
        assert x.duration_seconds >= 0


def test_a_page_reads_the_same_and_the_connection_is_reused(page: bytes, loop: ScrapeLoop, workers) -> None:
    a, b, sa, sb = both(keep_alive(lambda req, s: answer(page)), loop, workers, times=3)
    assert_same(a, b)
    assert b[0].ok and b[0].snapshot is not None
    assert sb.connections == sa.connections == 1


def test_the_request_is_the_transports_byte_for_byte(loop: ScrapeLoop, workers) -> None:
    _, _, sa, sb = both(keep_alive(lambda req, s: answer(b"x 1\n")), loop, workers)
    assert [r.replace(str(sb.port).encode(), b"PORT") for r in sb.requests] == [
        r.replace(str(sa.port).encode(), b"PORT") for r in sa.requests
    ]
    assert f"Accept: {ACCEPT_HEADER}".encode() in sb.requests[0]


def test_chunked_and_gzip_bodies_read_the_same(page: bytes, loop: ScrapeLoop, workers) -> None:
    for make in (
        lambda req, s: answer(chunked(page), headers=("Transfer-Encoding: chunked",)),
        lambda req, s: answer(gzip.compress(page), headers=("Content-Encoding: gzip",)),
        lambda req, s: answer(
            chunked(gzip.compress(page), 777), headers=("Content-Encoding: gzip", "Transfer-Encoding: chunked")
        ),
    ):
        a, b, _, _ = both(keep_alive(make), loop, workers, times=2)
        assert_same(a, b)
        assert b[1].ok


def test_oversize_bodies_are_too_large_the_same_way(page: bytes, loop: ScrapeLoop, workers) -> None:
    big = gzip.compress(b"# " + b"x" * 2_000_000 + b"\n")
    for make in (
        lambda req, s: answer(page),
        lambda req, s: answer(chunked(page), headers=("Transfer-Encoding: chunked",)),
        lambda req, s: answer(big, headers=("Content-Encoding: gzip",)),
    ):
        a, b, _, _ = both(keep_alive(make), loop, workers, max_bytes=10_000)
        assert_same(a, b)
        assert b[0].error_reason == "too_large"


def test_error_statuses_carry_the_same_snippet(loop: ScrapeLoop, workers) -> None:
    for make in (
        lambda req, s: answer(b"no such page\n", "404 Not Found"),
        lambda req, s: answer(b"busy " * 1000, "503 Service Unavailable"),
        lambda req, s: answer(gzip.compress(b"gone away\n"), "500 Oops", ("Content-Encoding: gzip",)),
        lambda req, s: answer(chunked(b"chunked error\n", 3), "502 Bad Gateway", ("Transfer-Encoding: chunked",)),
        lambda req, s: answer(b"", "401 Unauthorized"),
    ):
        a, b, _, _ = both(keep_alive(make), loop, workers, times=2)
        assert_same(a, b)
        assert b[0].error_reason == "http_status"


def test_a_refused_connection_is_refused_the_same_way(loop: ScrapeLoop, workers) -> None:
    s = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
    s.close()
    ta, tb = target_transport(url), target_transport(url)
    a = collect(job(url), ta)
    b = loop.submit("t", job(url), tb, workers).result(30)[0]
    ta.close()
    tb.close()
    assert fields(b) == fields(a)
    assert b.error_reason == "connection_refused"


def test_servers_that_close_mid_answer_fail_the_same_way(page: bytes, loop: ScrapeLoop, workers) -> None:
    def cut(out: bytes) -> Handler:
        def handle(conn: socket.socket, server: RawServer) -> None:
            if read_request(conn) is not None:
                conn.sendall(out)

        return handle

    whole = answer(page)
    for handler in (
        cut(whole[: len(whole) // 2]),  # Content-Length body cut short
        cut(answer(chunked(page), headers=("Transfer-Encoding: chunked",))[:30000]),  # mid chunk
        cut(answer(b"", headers=("Transfer-Encoding: chunked",)) + b"1a"),  # in a chunk-size line
        cut(b""),  # closed before any answer
        cut(b"HTTP/1.1 200"),  # a status line cut short
        cut(b"HELLO\r\n\r\n"),  # not HTTP
    ):
        a, b, _, _ = both(handler, loop, workers)
        assert_same(a, b)
        assert not b[0].ok


def test_slow_servers_time_out_the_same_way(page: bytes, loop: ScrapeLoop, workers) -> None:
    def silent(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        time.sleep(3)

    def head_then_stall(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(answer(page)[:2000])
        time.sleep(3)

    def drip(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        for i, byte in enumerate(answer(page)):
            conn.sendall(bytes([byte]))
            if i % 50 == 0:
                time.sleep(0.02)

    # a stall of 0.4 s ends a read well before the deadline of 1.4 s; a drip never stalls and meets the deadline
    for handler, kw in (
        (silent, {"connect": 1.0, "read": 0.4}),
        (head_then_stall, {"connect": 1.0, "read": 0.4}),
        (drip, {"connect": 0.2, "read": 0.8}),
    ):
        a, b, _, _ = both(handler, loop, workers, **kw)
        assert_same(a, b)
        assert b[0].error_reason == "timeout"


def test_a_server_closing_idle_connections_is_asked_on_a_new_one(page: bytes, loop: ScrapeLoop, workers) -> None:
    def one_answer_per_connection(conn: socket.socket, server: RawServer) -> None:
        if read_request(conn) is not None:
            conn.sendall(answer(page))
            time.sleep(0.2)  # then closes the idle connection (no Connection: close)

    def closes_when_asked_again(conn: socket.socket, server: RawServer) -> None:
        if read_request(conn) is not None:
            conn.sendall(answer(page))
            read_request(conn)  # the second request on this connection: closed unanswered

    def says_close(conn: socket.socket, server: RawServer) -> None:
        if read_request(conn) is not None:
            conn.sendall(answer(page, headers=("Connection: close",)))

    for handler in (one_answer_per_connection, closes_when_asked_again, says_close):
        a_server, b_server = RawServer(handler), RawServer(handler)
        try:
            ta, tb = target_transport(a_server.url()), target_transport(b_server.url())
            a, b = [], []
            for _ in range(3):
                a.append(collect(job(a_server.url()), ta))
                b.append(loop.submit("t", job(b_server.url()), tb, workers).result(30)[0])
                time.sleep(0.4)
            assert_same(a, b)
            assert all(x.ok for x in b)
            assert b_server.connections == a_server.connections == 3
        finally:
            ta.close()
            tb.close()
            a_server.close()
            b_server.close()


def test_credentials_sample_limit_and_what_the_loop_leaves_to_the_transport(page: bytes, loop, workers) -> None:
    def auth(req: bytes, s: RawServer) -> bytes:
        ok = b"Authorization: Basic dXNlcjpzM2NyZXQ=" in req
        return answer(page) if ok else answer(b"who are you s3cret\n", "401 Unauthorized")

    a, b, _, _ = both(keep_alive(auth), loop, workers, userinfo="user:s3cret@", userinfo2="user:s3cret@")
    assert_same(a, b)
    assert b[0].ok
    a, b, _, _ = both(keep_alive(auth), loop, workers, userinfo="user:wrong@", userinfo2="user:wrong@")
    assert_same(a, b)
    assert b[0].error_reason == "http_status"

    a, b, _, _ = both(keep_alive(lambda req, s: answer(page)), loop, workers, samples=10)
    assert_same(a, b)
    assert b[0].error_reason == "sample_limit"

    def redirect(req: bytes, s: RawServer) -> bytes:
        if b"GET /metrics " in req:
            return answer(b"", "302 Found", ("Location: /real",))
        return answer(page)

    def until_close(conn: socket.socket, server: RawServer) -> None:
        if read_request(conn) is not None:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + page)

    def http10(conn: socket.socket, server: RawServer) -> None:
        if read_request(conn) is not None:
            conn.sendall(answer(page).replace(b"HTTP/1.1", b"HTTP/1.0", 1))

    for handler in (keep_alive(redirect), until_close, http10):
        a, b, _, _ = both(handler, loop, workers, times=2)
        assert_same(a, b)
        assert b[1].ok


def test_bytes_that_waited_while_the_loop_was_busy_are_no_stall(page: bytes, loop: ScrapeLoop, workers) -> None:
    """The loop thread observing one page (here: held on the one-parser lock for longer than the read timeout)
    must not fail another target as stalled when that target's answer arrived meanwhile: the transport's thread
    would have found those bytes waiting in its socket, and so must the loop."""
    from advisor.collect import _OBSERVING

    def head_then_body(conn: socket.socket, server: RawServer) -> None:
        if read_request(conn) is None:
            return
        whole = answer(page)
        conn.sendall(whole[:200])
        time.sleep(0.3)  # the rest arrives while the loop is busy with the other page
        conn.sendall(whole[200:])
        read_request(conn)

    fast, slow = RawServer(keep_alive(lambda req, srv: answer(page))), RawServer(head_then_body)
    try:
        with _OBSERVING:  # the loop thread blocks in observe of the fast target's page for > read_timeout
            first = loop.submit("fast", job(fast.url(), read=1.0), target_transport(fast.url()), workers)
            second = loop.submit("slow", job(slow.url(), read=1.0), target_transport(slow.url()), workers)
            time.sleep(2.0)
        got = second.result(30)[0]
        assert first.result(30)[0].ok
        assert got.ok and got.error_reason is None, got.error_message
    finally:
        fast.close()
        slow.close()
