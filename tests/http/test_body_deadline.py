"""Issue 19 (breaker sibling): a request body that does not arrive within the read deadline is answered
``408 Request Timeout`` (RFC 9110 §15.5.9: the server did not receive a complete request message within the time
it was prepared to wait), with a short body naming the cause, and the connection is closed.

Before, a POST whose body was shorter than its ``Content-Length`` was held until the deadline and then closed with
no answer at all. Against the real :class:`~advisor.server.AdvisorHTTPServer` on a free loopback port, through a raw
socket; the deadline is the server's ``body_timeout`` (1 s here, 30 s by default), and the time bounds carry generous
jitter (the answer may come up to a serve-loop poll later, and a loaded machine adds more).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.server import BODY_TIMEOUT, AdvisorHTTPServer
from advisor.service import Service
from tests.http.conftest import config
from tests.reliability.test_http_server import _self_signed

DEADLINE = 1.0
"""The server's body deadline in these tests, seconds."""
JITTER = 10.0
"""Seconds past the deadline the answer may take on a loaded machine (a poll of the serve loop is 0.5 s)."""


@pytest.fixture(params=["http", "https"])
def srv(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[AdvisorHTTPServer]:
    """The advisor's server with a 1 s body deadline, plain or with TLS (``--web.config.file``); a TLS server
    carries its CA file as ``srv.ca``."""
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(config("http://127.0.0.1:9/metrics", tmp_path / "state.json")), collector, metrics)
    web = None
    ca = None
    if request.param == "https":
        ca = _self_signed(tmp_path)
        web = tmp_path / "web.yml"
        web.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    server = AdvisorHTTPServer(("127.0.0.1", 0), svc, registry, web_config=web, body_timeout=DEADLINE)
    server.ca = ca  # type: ignore[attr-defined]
    server.start_background()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        svc.close()


def _connect(srv: AdvisorHTTPServer) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=DEADLINE + JITTER + 5)
    ca = getattr(srv, "ca", None)
    if ca is None:
        return s
    return ssl.create_default_context(cafile=str(ca)).wrap_socket(s, server_hostname="127.0.0.1")


def _head(path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    ).encode()


def _read_all(s: socket.socket, into: list[bytes] | None = None) -> bytes:
    """Every byte until the server closes (or resets: what came before is kept), also appended to ``into``."""
    chunks = [] if into is None else into
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except (ConnectionResetError, ssl.SSLError):
        pass
    return b"".join(chunks)


def _short_post(srv: AdvisorHTTPServer, path: str) -> tuple[bytes, float]:
    """POST ``path`` announcing 100 bytes and sending 10, then read until the server closes: ``(answer, seconds
    from the last byte sent to the close)``."""
    s = _connect(srv)
    try:
        s.sendall(_head(path) + b'{"deployme')
        sent = time.monotonic()
        return _read_all(s), time.monotonic() - sent
    finally:
        s.close()


def test_a_body_shorter_than_its_content_length_is_answered_408_at_the_deadline(srv: AdvisorHTTPServer) -> None:
    answer, took = _short_post(srv, "/api/v1/plan")
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.0 408 Request Timeout", answer[:300]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["status"] == 408
    assert "10 of 100 bytes" in body["error"] and f"{DEADLINE:g}s" in body["error"], body
    # not before the deadline (less a poll's slack in the clock reads), and bounded by it
    assert DEADLINE - 0.2 <= took <= DEADLINE + JITTER, took


def test_the_default_deadline_stays_bounded() -> None:
    assert 0 < BODY_TIMEOUT <= 60


def test_a_body_dripped_in_does_not_outlast_the_deadline(srv: AdvisorHTTPServer) -> None:
    """One byte every 0.2 s would take 20 s for the 100 announced; the answer is a 408 at the 1 s deadline."""
    s = _connect(srv)
    chunks: list[bytes] = []
    try:
        s.sendall(_head("/api/v1/plan"))
        started = time.monotonic()
        reader = threading.Thread(target=_read_all, args=(s, chunks), daemon=True)
        reader.start()
        for _ in range(100):
            time.sleep(0.2)
            if not reader.is_alive():
                break
            try:
                s.sendall(b" ")
            except OSError:
                break
        reader.join(DEADLINE + JITTER)
        took = time.monotonic() - started
    finally:
        s.close()
    answer = b"".join(chunks)
    assert answer.startswith(b"HTTP/1.0 408 Request Timeout\r\n"), answer[:300]
    assert took <= DEADLINE + JITTER, took


def test_an_error_answered_before_the_body_still_reaches_the_client_when_the_body_stalls(
    srv: AdvisorHTTPServer,
) -> None:
    """A 404 is decided before the body is read; the server drains the body first (module docstring of
    :mod:`advisor.server`), and when the drain hits the deadline the 404 is still sent, then the connection closed."""
    answer, took = _short_post(srv, "/api/v1/no-such-path")
    assert answer.startswith(b"HTTP/1.0 404 "), answer[:300]
    assert DEADLINE - 0.2 <= took <= DEADLINE + JITTER, took
