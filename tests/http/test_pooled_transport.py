"""Issue 15, "a lean scrape transport behind the one HTTP edge policy": :class:`advisor.http_edge.PooledTransport`
(``http.client``, one keep-alive connection per target) against real loopback servers — stand-in
``http.server`` handlers and raw sockets, never a mocked client library.

The semantics are those the isolation issue (14) pinned for the ``requests`` path: one deadline over the whole
request, the byte cap (declared and decoded), redirects with their bodies never read and credentials kept from
other hosts, userinfo and netrc auth, the CA bundle from the environment, and the same error classes, reasons and
messages. Where both transports can answer, a case is run through both and the outcomes compared. No timing is
asserted tighter than a loaded machine allows: drips are bounded by a generous multiple of the deadline, and
keep-alive is judged by counting the connections the server accepted.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import gzip
import ipaddress
import os
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from advisor.config import parse_config
from advisor.conventions import (
    REASON_CONNECTION_REFUSED,
    REASON_HTTP_STATUS,
    REASON_PARSE_ERROR,
    REASON_TIMEOUT,
    REASON_TOO_LARGE,
)
from advisor.exporter import make_registry
from advisor.http_edge import (
    PooledTransport,
    RequestsTransport,
    target_session,
    target_transport,
)
from advisor.service import Service
from advisor.sources.scrape import ScrapeResult, scrape
from tests.reliability.iso_support import DripServer, deployment, vllm_page

PAGE = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
Handle = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No proxy, netrc or CA bundle from the machine running the tests."""
    for name in (*PROXY_VARS, "no_proxy", "NO_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return monkeypatch


class KeepAliveServer(ThreadingHTTPServer):
    """An HTTP/1.1 server (keep-alive) on 127.0.0.1 running ``handle`` for every request; ``connections`` counts
    the connections it accepted, ``requests`` the requests it answered (path, ``Authorization``)."""

    daemon_threads = True

    def __init__(self, handle: Handle, tls: ssl.SSLContext | None = None) -> None:
        self.connections = 0
        self.requests: list[tuple[str, str | None]] = []
        self._tls = tls
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append((self.path, self.headers.get("Authorization")))
                with contextlib.suppress(OSError):
                    handle(self)

            do_POST = do_GET  # noqa: N815 (http.server names handlers so)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        self.connections += 1
        if self._tls is not None:
            sock = self._tls.wrap_socket(sock, server_side=True)
        return sock, addr

    def url(self, path: str = "/metrics", host: str = "127.0.0.1") -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{host}:{self.server_address[1]}{path}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., KeepAliveServer]]:
    servers: list[KeepAliveServer] = []

    def start(handle: Handle, tls: ssl.SSLContext | None = None) -> KeepAliveServer:
        srv = KeepAliveServer(handle, tls)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()


class RawServer:
    """A raw-socket server: ``script(conn, n)`` runs for the n-th accepted connection (from 0)."""

    def __init__(self, script: Callable[[socket.socket, int], None]) -> None:
        self.connections = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._script = script
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            n, self.connections = self.connections, self.connections + 1
            threading.Thread(target=self._run, args=(conn, n), daemon=True).start()

    def _run(self, conn: socket.socket, n: int) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(10)
            self._script(conn, n)

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}{path}"

    def close(self) -> None:
        self._sock.close()


def page(h: BaseHTTPRequestHandler, body: bytes = PAGE, status: int = 200, **headers: str) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "text/plain; version=0.0.4")
    for k, v in ({"Content-Length": str(len(body))} | headers).items():
        h.send_header(k.replace("_", "-"), v)
    h.end_headers()
    h.wfile.write(body)


# --- keep-alive -------------------------------------------------------------------------------------------------


def test_one_connection_serves_every_scrape_of_a_target(serve: Callable[..., KeepAliveServer]) -> None:
    srv = serve(page)
    transport = target_transport(srv.url())
    assert isinstance(transport, PooledTransport)
    try:
        results = [scrape(srv.url(), transport) for _ in range(5)]
    finally:
        transport.close()
    assert [r.text for r in results] == [PAGE.decode()] * 5
    assert len(srv.requests) == 5
    assert srv.connections == 1


def test_a_connection_the_server_closed_between_scrapes_is_replaced(serve: Callable[..., KeepAliveServer]) -> None:
    """``Connection: close`` on every answer, then a server that closes an idle keep-alive connection silently:
    each scrape succeeds on a fresh connection."""
    closing = serve(lambda h: page(h, Connection="close"))
    with contextlib.closing(PooledTransport()) as transport:
        assert all(scrape(closing.url(), transport).ok for _ in range(3))
    assert closing.connections == 3

    def keep_then_close(conn: socket.socket, n: int) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE))
        # keep-alive advertised (HTTP/1.1), then closed while idle

    raw = RawServer(keep_then_close)
    try:
        with contextlib.closing(PooledTransport()) as transport:
            first = scrape(raw.url(), transport)
            time.sleep(0.2)  # the server has closed the idle connection by now
            second = scrape(raw.url(), transport)
    finally:
        raw.close()
    assert first.ok and second.ok, (first, second)
    assert raw.connections == 2


def test_a_reused_connection_dropped_as_the_request_goes_out_is_asked_again_on_a_new_one() -> None:
    """The race urllib3's staleness check cannot see: the server takes the second request on a kept connection and
    closes without answering. The request is sent once more, on a new connection, and succeeds."""

    def drop_second(conn: socket.socket, n: int) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE))
        if n == 0:
            conn.recv(65536)  # the next request on this connection: dropped unanswered
            return
        while conn.recv(65536):  # later connections answer every request
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE))

    raw = RawServer(drop_second)
    try:
        with contextlib.closing(PooledTransport()) as transport:
            results = [scrape(raw.url(), transport) for _ in range(3)]
    finally:
        raw.close()
    assert all(r.ok for r in results), results
    assert raw.connections == 2


def test_a_connection_whose_body_was_not_read_to_the_end_is_never_reused(
    serve: Callable[..., KeepAliveServer],
) -> None:
    """Content-Length over the cap (refused before reading), a body over the cap, an error body longer than
    what is kept of it: each closes its connection; the next scrape reads a clean answer on a new one."""
    big = b"#" * 5000

    def handle(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/chunked":
            h.send_response(200)
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            h.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big))
        else:
            page(h, big, status=500) if h.path == "/err" else page(h, big) if h.path == "/big" else page(h)

    srv = serve(handle)
    with contextlib.closing(PooledTransport()) as transport:
        declared = scrape(srv.url("/big"), transport, max_bytes=1000)
        assert scrape(srv.url(), transport).ok
        counted = scrape(srv.url("/chunked"), transport, max_bytes=1000)
        assert scrape(srv.url(), transport).ok
        error = scrape(srv.url("/err"), transport)
        after = scrape(srv.url(), transport)
    assert declared.error_reason == REASON_TOO_LARGE and "Content-Length" in str(declared.error_message)
    assert counted.error_reason == REASON_TOO_LARGE and "Content-Length" not in str(counted.error_message)
    assert error.error_reason == REASON_HTTP_STATUS and error.status_code == 500
    assert after.ok and after.text == PAGE.decode()
    assert srv.connections == 4  # the first, and one after each unread body


def test_concurrent_requests_on_one_transport_never_share_a_connection(
    serve: Callable[..., KeepAliveServer],
) -> None:
    body = vllm_page()
    srv = serve(lambda h: page(h, body))
    results: list[ScrapeResult] = []
    with contextlib.closing(PooledTransport()) as transport:

        def work() -> None:
            for _ in range(10):
                results.append(scrape(srv.url(), transport))

        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(results) == 60 and all(r.ok and r.text == body.decode() for r in results)


def test_close_releases_the_idle_connection_and_the_transport_still_answers(
    serve: Callable[..., KeepAliveServer],
) -> None:
    srv = serve(page)
    transport = PooledTransport()
    assert scrape(srv.url(), transport).ok
    transport.close()
    assert scrape(srv.url(), transport).ok  # works, on a new connection, not kept
    assert scrape(srv.url(), transport).ok
    assert srv.connections == 3


def test_a_forked_child_opens_its_own_connection(serve: Callable[..., KeepAliveServer]) -> None:
    """A worker process forked from the daemon never writes on its parent's kept connection: the two would read
    each other's answers."""
    srv = serve(page)
    with contextlib.closing(PooledTransport()) as transport:
        assert scrape(srv.url(), transport).ok
        pid = os.fork()
        if pid == 0:  # the child: one scrape, then out without running any of pytest's teardown
            os._exit(0 if scrape(srv.url(), transport).ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert scrape(srv.url(), transport).ok
    assert srv.connections == 2  # the parent's, kept, and the child's own


# --- the deadline -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["header", "body"])
def test_a_dripping_target_is_cut_at_the_deadline_and_its_connection_not_reused(mode: str) -> None:
    """One byte every 0.2 s (:class:`DripServer`): each read is well inside the read timeout, so only the deadline
    (0.5 + 1.0 s) can stop it. The drip never ends (an endless header, a 1 MiB body at 5 bytes/s: 58 hours), so the
    bound only has to tell the deadline from the drip: 10× the deadline, since a loaded machine (a CI run beside the
    vLLM e2e tests) once took 4.9 s to return from a cut at 1.5 s."""
    drip = DripServer(mode)
    try:
        with contextlib.closing(PooledTransport()) as transport:
            start = time.monotonic()
            first = scrape(drip.url(), transport, connect_timeout=0.5, read_timeout=1.0)
            took = time.monotonic() - start
            second = scrape(drip.url(), transport, connect_timeout=0.5, read_timeout=1.0)
    finally:
        drip.close()
    for result in (first, second):
        assert (result.ok, result.error_reason) == (False, REASON_TIMEOUT), result
        assert "deadline of 1.5s" in str(result.error_message), result
    assert first.status_code == (200 if mode == "body" else None)
    assert took < 15.0, took
    assert drip.connections == 2


def test_a_stall_inside_the_read_timeout_window_is_a_stall_not_the_deadline(
    serve: Callable[..., KeepAliveServer],
) -> None:
    def stall(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b"vllm:x 1\n")
        h.wfile.flush()
        time.sleep(3)

    srv = serve(stall)
    with contextlib.closing(PooledTransport()) as transport:
        result = scrape(srv.url(), transport, connect_timeout=5.0, read_timeout=0.3)
    assert result.error_reason == REASON_TIMEOUT and result.status_code == 200
    assert result.error_message == "body read stalled longer than 0.3s"


# --- the byte cap -----------------------------------------------------------------------------------------------


def test_a_chunked_body_over_the_cap_is_too_large(serve: Callable[..., KeepAliveServer]) -> None:
    def chunked(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for _ in range(64):
            h.wfile.write(b"4000\r\n" + b"#" * 0x4000 + b"\r\n")
        h.wfile.write(b"0\r\n\r\n")

    srv = serve(chunked)
    with contextlib.closing(PooledTransport()) as transport:
        over = scrape(srv.url(), transport, max_bytes=100_000)
        whole = scrape(srv.url(), transport, max_bytes=64 * 0x4000)
    assert over.error_reason == REASON_TOO_LARGE and over.error_message == "body exceeds the cap of 100000 bytes"
    assert over.status_code == 200
    assert whole.ok and whole.text == "#" * (64 * 0x4000)  # exactly at the cap is not over it


def test_a_gzip_bomb_is_cut_at_the_cap(serve: Callable[..., KeepAliveServer]) -> None:
    """64 MiB of zeros in ~64 KB of gzip, chunked: the decoder never yields more than the room left under the cap."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"0" * (1 << 20)
    bomb = b"".join(packer.compress(zeros) for _ in range(64)) + packer.flush()
    assert len(bomb) < 100_000

    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(bomb), bomb))

    srv = serve(send)
    with contextlib.closing(PooledTransport()) as transport:
        result = scrape(srv.url(), transport, max_bytes=1_000_000)
    assert result.error_reason == REASON_TOO_LARGE and result.status_code == 200, result


def test_gzip_and_deflate_bodies_are_decoded(serve: Callable[..., KeepAliveServer]) -> None:
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    bodies = {
        "/gzip": ("gzip", gzip.compress(PAGE)),
        "/two-members": ("gzip", gzip.compress(PAGE[:40]) + gzip.compress(PAGE[40:])),
        "/deflate": ("deflate", zlib.compress(PAGE)),
        "/raw-deflate": ("deflate", raw_deflate.compress(PAGE) + raw_deflate.flush()),
    }
    srv = serve(lambda h: page(h, bodies[h.path][1], Content_Encoding=bodies[h.path][0]))
    with contextlib.closing(PooledTransport()) as transport:
        results = {path: scrape(srv.url(path), transport) for path in bodies}
    assert {p: r.text for p, r in results.items()} == dict.fromkeys(bodies, PAGE.decode())
    assert srv.connections == 1


# --- redirects and credentials ----------------------------------------------------------------------------------


def test_userinfo_is_sent_as_basic_auth_percent_decoded(serve: Callable[..., KeepAliveServer]) -> None:
    srv = serve(page)
    url = srv.url().replace("http://", "http://al%40ice:p%3Ass%20w@")
    transport = target_transport(url)
    try:
        assert scrape(url, transport).ok
    finally:
        transport.close()
    assert srv.requests == [("/metrics", "Basic " + base64.b64encode(b"al@ice:p:ss w").decode())]


def test_netrc_credentials_take_precedence_over_userinfo(
    serve: Callable[..., KeepAliveServer], clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login scraper password s3cret\n")
    netrc.chmod(0o600)
    clean_env.setenv("NETRC", str(netrc))
    srv = serve(page)
    url = srv.url().replace("http://", "http://alice:pw@")
    for transport in (target_transport(url), RequestsTransport(target_session(url))):
        try:
            assert scrape(url, transport).ok
        finally:
            transport.close()
    pooled, requested = srv.requests
    assert pooled == requested == ("/metrics", "Basic " + base64.b64encode(b"scraper:s3cret").decode())


def test_a_redirect_to_another_host_carries_no_credentials_and_its_body_is_never_read(
    serve: Callable[..., KeepAliveServer], clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """127.0.0.1 → localhost (another host by name): the userinfo's and the netrc's credentials stay behind. The
    redirect's body (declared 10 MB, never sent) is not waited for: the answer comes from the next host, not a
    timeout. A redirect on the same host keeps the credentials."""
    far = serve(page)

    def redirect(h: BaseHTTPRequestHandler) -> None:
        target = far.url(host="localhost") if h.path.startswith("/away") else "/metrics"
        h.send_response(302)
        h.send_header("Location", target)
        h.send_header("Content-Length", str(10_000_000))
        h.end_headers()
        h.wfile.write(b"never all of it")

    near = serve(lambda h: page(h) if h.path == "/metrics" else redirect(h))
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login scraper password s3cret\n")
    netrc.chmod(0o600)
    user = "http://alice:pw@"
    with contextlib.closing(PooledTransport()) as transport:  # userinfo only
        away = scrape(near.url("/away").replace("http://", user), transport, connect_timeout=2, read_timeout=5)
        home = scrape(near.url("/home").replace("http://", user), transport, connect_timeout=2, read_timeout=5)
    clean_env.setenv("NETRC", str(netrc))
    netrc_transport = target_transport(near.url("/away"))
    try:
        netrc_away = scrape(near.url("/away"), netrc_transport, connect_timeout=2, read_timeout=5)
    finally:
        netrc_transport.close()
    assert away.ok and home.ok and netrc_away.ok, (away, home, netrc_away)
    alice = "Basic " + base64.b64encode(b"alice:pw").decode()
    assert far.requests == [("/metrics", None), ("/metrics", None)]
    assert near.requests == [("/away", alice), ("/home", alice), ("/metrics", alice), ("/away", netrc_auth())]


def netrc_auth() -> str:
    return "Basic " + base64.b64encode(b"scraper:s3cret").decode()


def test_too_many_redirects_stops_where_requests_stops(serve: Callable[..., KeepAliveServer]) -> None:
    def again(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", "/again")
        h.send_header("Content-Length", "0")
        h.end_headers()

    srv = serve(again)
    outcomes = []
    for transport in (PooledTransport(), RequestsTransport(target_session(srv.url()))):
        before = len(srv.requests)
        result = scrape(srv.url(), transport)
        transport.close()
        outcomes.append((result.error_reason, result.error_message, len(srv.requests) - before))
    assert outcomes[0] == outcomes[1] == (REASON_HTTP_STATUS, "too many redirects", 31)


# --- HTTPS ------------------------------------------------------------------------------------------------------


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    crt, pem = folder / "server.crt", folder / "server.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return crt, pem


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_https_is_verified_with_the_ca_bundle_from_the_environment(
    variable: str, serve: Callable[..., KeepAliveServer], clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    crt, key = _self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(crt, key)
    srv = serve(page, tls)
    url = srv.url()

    def both() -> list[tuple[str | None, str | None]]:
        out = []
        for transport in (target_transport(url), RequestsTransport(target_session(url))):
            try:
                out.append((scrape(url, transport).error_reason, scrape(url, transport).error_message))
            finally:
                transport.close()
        return out

    unverified = both()  # the default bundle does not know this certificate
    clean_env.setenv(variable, str(crt))
    verified = both()
    clean_env.setenv(variable, str(tmp_path / "missing.pem"))
    missing = both()
    # OpenSSL's own words (was "connection failed (SSLCertVerificationError)": breaker, 2026-12-03)
    assert unverified == [(REASON_CONNECTION_REFUSED, "TLS certificate not trusted (self-signed certificate)")] * 2
    assert verified == [(None, None)] * 2
    assert missing == [(REASON_CONNECTION_REFUSED, "request failed (OSError)")] * 2
    # the verified pooled transport kept its TLS connection for its second scrape
    clean_env.setenv(variable, str(crt))
    before = srv.connections
    with contextlib.closing(target_transport(url)) as transport:
        assert isinstance(transport, PooledTransport)
        assert all(scrape(url, transport).ok for _ in range(3))
    assert srv.connections - before == 1


def test_https_to_a_plain_http_port_says_so_on_both_transports(
    serve: Callable[..., KeepAliveServer], clean_env: pytest.MonkeyPatch
) -> None:
    """Breaker, 2026-12-03: ``inspect https://host:plain-port/metrics`` said "connection failed (SSLError)"."""
    url = serve(page).url().replace("http://", "https://", 1)
    plain = "TLS handshake failed: the target answered in plain HTTP (use http://)"
    assert _failures_on_both_transports(url) == [(REASON_CONNECTION_REFUSED, plain)] * 2


def _failures_on_both_transports(url: str) -> list[tuple[str | None, str | None]]:
    """``(error_reason, error_message)`` of one scrape of ``url`` on the pooled transport, then on requests."""
    out = []
    for transport in (target_transport(url), RequestsTransport(target_session(url))):
        try:
            r = scrape(url, transport)
            out.append((r.error_reason, r.error_message))
        finally:
            transport.close()
    return out


def test_a_host_name_that_does_not_resolve_says_so_on_both_transports(clean_env: pytest.MonkeyPatch) -> None:
    """Breaker and walkthrough, 2026-12-04: ``inspect http://no-such-host.invalid/metrics`` said "connection failed
    (gaierror)". ``.invalid`` never resolves (RFC 2606 §2)."""
    url = "http://no-such-host.invalid:8000/metrics"
    expected = [(REASON_CONNECTION_REFUSED, "host name not found (DNS lookup failed)")] * 2
    assert _failures_on_both_transports(url) == expected


# --- proxies ----------------------------------------------------------------------------------------------------


def test_a_proxy_from_the_environment_keeps_the_requests_path(
    serve: Callable[..., KeepAliveServer], clean_env: pytest.MonkeyPatch
) -> None:
    """``http_proxy`` applying to the URL: the requests transport, which sends through the proxy (the stand-in
    proxy sees the absolute-form request line); a host ``no_proxy`` names: the pooled transport, direct."""
    proxy = serve(page)
    direct = serve(page)
    far = "http://engine.pooled-proxy-test.invalid:8000/metrics"
    clean_env.setenv("http_proxy", proxy.url(path=""))
    clean_env.setenv("no_proxy", "localhost")
    proxied = target_transport(far)
    near = target_transport(direct.url(host="localhost"))
    try:
        assert isinstance(proxied, RequestsTransport) and isinstance(near, PooledTransport)
        assert scrape(far, proxied).ok and scrape(direct.url(host="localhost"), near).ok
    finally:
        proxied.close()
        near.close()
    assert proxy.requests == [(far, None)]
    assert direct.requests == [("/metrics", None)]


# --- the same outcome as the requests path ----------------------------------------------------------------------


def _raw(answer: bytes, linger: float = 0.05) -> Callable[[socket.socket, int], None]:
    def script(conn: socket.socket, n: int) -> None:
        conn.recv(65536)
        conn.sendall(answer)
        time.sleep(linger)

    return script


PARITY: dict[str, bytes] = {
    "closed without an answer": b"",
    "a bad status line": b"HELLO\r\n\r\n",
    "a body cut short": b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nabc",
    "a bad chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc",
    "gzip that does not decode": b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n0123456789",
    "Content-Length over the cap": b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n",
    "an HTTP/1.0 body over the cap": b"HTTP/1.0 200 OK\r\n\r\n" + b"#" * 3000,
    "a 503 with a body": b"HTTP/1.1 503 Busy\r\nContent-Length: 23\r\n\r\nengine overloaded token",
    "a header line too long": b"HTTP/1.1 200 OK\r\nX-A: " + b"b" * 70_000 + b"\r\n\r\n",
    "too many headers": b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 200 + b"\r\n",
}


@pytest.mark.parametrize("case", list(PARITY))
def test_each_failure_has_the_reason_and_message_of_the_requests_path(case: str) -> None:
    raw = RawServer(_raw(PARITY[case]))
    url = raw.url().replace("http://", "http://alice:pa55word@") + "?token=t0ken"
    try:
        outcomes = []
        for transport in (target_transport(url), RequestsTransport(target_session(url))):
            try:
                r = scrape(url, transport, connect_timeout=2.0, read_timeout=3.0, max_bytes=1000)
            finally:
                transport.close()
            outcomes.append((r.ok, r.error_reason, r.error_message, r.status_code, r.target))
    finally:
        raw.close()
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][1] in (REASON_CONNECTION_REFUSED, REASON_HTTP_STATUS, REASON_PARSE_ERROR, REASON_TOO_LARGE)
    assert "pa55word" not in str(outcomes[0]) and "t0ken" not in str(outcomes[0])


@pytest.mark.parametrize(
    "url",
    [
        "not a url?token=SECRET",
        "engine:8000/metrics",
        "ftp://127.0.0.1/metrics",
        "http:///metrics",
        "http://127.0.0.1:99999/metrics",
        "http://127.0.0.1:abc/metrics",
        "http://nonexistent.pooled-test.invalid/metrics",
    ],
)
def test_a_bad_url_fails_as_on_the_requests_path(url: str) -> None:
    outcomes = []
    for transport in (PooledTransport(), RequestsTransport(target_session(url))):
        r = scrape(url, transport, connect_timeout=2.0, read_timeout=2.0)
        transport.close()
        outcomes.append((r.ok, r.error_reason, r.error_message, r.target))
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][1] == REASON_CONNECTION_REFUSED and "SECRET" not in str(outcomes[0])


def test_a_closed_port_is_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with contextlib.closing(PooledTransport()) as transport:
        refused = scrape(f"http://127.0.0.1:{port}/metrics", transport)
    assert (refused.error_reason, refused.error_message) == (REASON_CONNECTION_REFUSED, "connection refused")
    assert refused.status_code is None


# --- the daemon -------------------------------------------------------------------------------------------------


def test_the_daemon_scrapes_each_target_on_one_kept_connection(
    serve: Callable[..., KeepAliveServer], tmp_path: Path
) -> None:
    body = vllm_page()
    srv = serve(lambda h: page(h, body))
    cfg = parse_config(
        {
            "scrape_interval": "30s",
            "evaluation_window": "2m",
            "deployments": [deployment("a", [srv.url("/a/metrics")]), deployment("b", [srv.url("/b/metrics")])],
        }
    )
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    try:
        for _ in range(3):
            svc.scrape_once()
        transports = dict(svc.runtime.transports)
        states = {d.name: d.state for d in svc.evaluate_once().deployments}
    finally:
        svc.close()
    assert states == {"a": "fresh", "b": "fresh"}, states
    assert all(isinstance(t, PooledTransport) for t in transports.values()), transports
    assert len(srv.requests) == 6
    assert srv.connections == 2  # one per target, kept across cycles
