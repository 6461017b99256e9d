"""scrape() against real loopback servers: every failure becomes a reason, never an exception."""

from __future__ import annotations

import gzip
import socket
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest
import requests

from advisor.conventions import (
    REASON_CONNECTION_REFUSED,
    REASON_HTTP_STATUS,
    REASON_PARSE_ERROR,
    REASON_TIMEOUT,
    REASON_TOO_LARGE,
    SCRAPE_ERROR_REASONS,
)
from advisor.errors import ParseError
from advisor.redact import redact_url
from advisor.sources.exposition import parse_exposition
from advisor.sources.scrape import ScrapeResult, classify_parse_error, scrape

Serve = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]

BODY = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
SECRETS = ("pa55word", "alice", "SECRET", "t0ken", "YWxpY2U6cGE1NXdvcmQ=")


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def reply(status: int, body: bytes, headers: dict[str, str] | None = None) -> Callable[[BaseHTTPRequestHandler], None]:
    def handle(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "text/plain; version=0.0.4")
        for k, v in (headers if headers is not None else {"Content-Length": str(len(body))}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    return handle


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def assert_failed(result: ScrapeResult, reason: str) -> None:
    assert not result.ok
    assert result.text is None
    assert result.error_reason == reason
    assert result.error_reason in SCRAPE_ERROR_REASONS
    assert result.error_message


def test_a_2xx_body_is_returned_as_text(serve: Serve, session: requests.Session) -> None:
    seen: dict[str, str] = {}

    def handle(h: BaseHTTPRequestHandler) -> None:
        seen["accept"] = h.headers.get("Accept", "")
        reply(200, BODY)(h)

    base = serve(handle)
    result = scrape(base + "/metrics", session)
    assert result.ok
    assert result.text == BODY.decode()
    assert result.status_code == 200
    assert result.error_reason is None and result.error_message is None
    assert result.target == base + "/metrics"
    assert 0 <= result.duration_seconds < 3
    assert seen["accept"].startswith("text/plain;version=0.0.4")


def test_a_gzip_body_is_decoded(serve: Serve, session: requests.Session) -> None:
    packed = gzip.compress(BODY)
    base = serve(reply(200, packed, {"Content-Encoding": "gzip", "Content-Length": str(len(packed))}))
    result = scrape(base + "/metrics", session)
    assert result.ok and result.text == BODY.decode()


def test_a_closed_port_is_connection_refused(session: requests.Session) -> None:
    result = scrape(f"http://127.0.0.1:{closed_port()}/metrics", session, connect_timeout=1.0)
    assert_failed(result, REASON_CONNECTION_REFUSED)
    assert result.status_code is None
    assert result.error_message == "connection refused"


def test_a_server_sleeping_past_the_read_timeout_is_a_timeout(serve: Serve, session: requests.Session) -> None:
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(1.5)
        reply(200, BODY)(h)

    result = scrape(serve(slow) + "/metrics", session, connect_timeout=1.0, read_timeout=0.3)
    assert_failed(result, REASON_TIMEOUT)
    assert result.duration_seconds < 1.4


def test_a_server_stalling_mid_body_is_a_timeout(serve: Serve, session: requests.Session) -> None:
    def stall(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b"vllm:x 1\n")
        h.wfile.flush()
        time.sleep(1.5)

    result = scrape(serve(stall) + "/metrics", session, connect_timeout=1.0, read_timeout=0.3)
    assert_failed(result, REASON_TIMEOUT)
    assert result.status_code == 200
    assert result.duration_seconds < 1.4


def test_a_server_trickling_bytes_past_the_deadline_is_a_timeout(serve: Serve, session: requests.Session) -> None:
    """Each byte arrives well within read_timeout, so only the overall deadline can stop it."""

    def trickle(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(100):  # 10 s at most
            h.wfile.write(b"#")
            h.wfile.flush()
            time.sleep(0.1)

    result = scrape(serve(trickle) + "/metrics", session, connect_timeout=0.2, read_timeout=0.5)
    assert_failed(result, REASON_TIMEOUT)
    assert "deadline" in (result.error_message or "")
    assert 0.6 < result.duration_seconds < 1.5  # deadline 0.7 s; one more read of ≤ 0.5 s at worst


def test_a_500_is_http_status_with_the_code(serve: Serve, session: requests.Session) -> None:
    result = scrape(serve(reply(500, b"engine exploded\n")) + "/metrics", session)
    assert_failed(result, REASON_HTTP_STATUS)
    assert result.status_code == 500
    assert "500" in (result.error_message or "")
    assert "engine exploded" in (result.error_message or "")


def test_a_declared_content_length_over_the_cap_is_too_large(serve: Serve, session: requests.Session) -> None:
    result = scrape(serve(reply(200, b"#" * 2000)) + "/metrics", session, max_bytes=1000)
    assert_failed(result, REASON_TOO_LARGE)
    assert result.status_code == 200
    assert "Content-Length" in (result.error_message or "")


def test_a_streamed_body_over_the_cap_is_too_large(serve: Serve, session: requests.Session) -> None:
    """No Content-Length (HTTP/1.0, body ends at close): the cap is enforced by counting."""
    result = scrape(serve(reply(200, b"#" * 200_000, headers={})) + "/metrics", session, max_bytes=100_000)
    assert_failed(result, REASON_TOO_LARGE)
    assert "Content-Length" not in (result.error_message or "")


def test_a_gzip_body_over_the_cap_once_decoded_is_too_large(serve: Serve, session: requests.Session) -> None:
    packed = gzip.compress(b"#" * 1_000_000)  # ~1 KiB on the wire
    base = serve(reply(200, packed, {"Content-Encoding": "gzip", "Content-Length": str(len(packed))}))
    result = scrape(base + "/metrics", session, max_bytes=100_000)
    assert_failed(result, REASON_TOO_LARGE)


def test_garbage_text_is_classified_as_a_parse_error(serve: Serve, session: requests.Session) -> None:
    fetched = scrape(serve(reply(200, b"<html><body>Bad gateway</body></html>\n")) + "/metrics", session)
    assert fetched.ok and fetched.text is not None
    with pytest.raises(ParseError) as err:
        parse_exposition(fetched.text)
    result = classify_parse_error(fetched, err.value)
    assert_failed(result, REASON_PARSE_ERROR)
    assert result.status_code == 200
    assert result.duration_seconds == fetched.duration_seconds


@pytest.mark.parametrize(
    "case",
    ["refused", "http_status", "timeout"],
)
def test_credentials_and_query_never_appear_in_target_or_message(
    case: str, serve: Serve, session: requests.Session
) -> None:
    def echo_500(h: BaseHTTPRequestHandler) -> None:  # a server that echoes the request line and auth
        body = f"bad request {h.path} auth={h.headers.get('Authorization')}".encode()
        reply(500, body)(h)

    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(1.0)

    if case == "refused":
        hostport = f"127.0.0.1:{closed_port()}"
    else:
        hostport = serve(echo_500 if case == "http_status" else slow).removeprefix("http://")
    url = f"http://alice:pa55word@{hostport}/metrics?token=SECRET&x=t0ken#frag"
    result = scrape(url, session, connect_timeout=1.0, read_timeout=0.3)
    assert not result.ok
    assert result.target == f"http://{hostport}/metrics"
    for secret in SECRETS:
        assert secret not in (result.error_message or ""), result.error_message
        assert secret not in result.target
    if case == "http_status":
        assert "<redacted>" in (result.error_message or "")


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        (
            "https://user:s3cret@vllm-0.internal:8000/metrics?token=abc#x",
            "https://vllm-0.internal:8000/metrics",
        ),
        ("http://10.0.0.5:8000/metrics", "http://10.0.0.5:8000/metrics"),
        ("http://[::1]:8000/metrics?k=v", "http://[::1]:8000/metrics"),
        ("http://token@host/metrics", "http://host/metrics"),
    ],
)
def test_redact_url_drops_userinfo_query_and_fragment(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


def test_an_invalid_url_is_a_failed_result_not_an_exception(session: requests.Session) -> None:
    result = scrape("not a url?token=SECRET", session)
    assert_failed(result, REASON_CONNECTION_REFUSED)
    assert "SECRET" not in (result.error_message or "") and "SECRET" not in result.target


def test_a_read_started_just_before_the_deadline_is_cut_at_the_deadline(
    serve: Serve, session: requests.Session
) -> None:
    """Bytes 0.45 s apart (inside the 0.5 s read timeout): the read that starts at 0.45 s would have waited
    until 0.9 s; the socket timeout is cut to what is left of the 0.7 s deadline instead."""

    def slow_drip(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100")
        h.end_headers()
        for _ in range(10):
            h.wfile.write(b"#")
            h.wfile.flush()
            time.sleep(0.45)

    result = scrape(serve(slow_drip) + "/metrics", session, connect_timeout=0.2, read_timeout=0.5)
    assert_failed(result, REASON_TIMEOUT)
    assert "deadline" in (result.error_message or "")
    assert result.duration_seconds < 0.85  # was up to 0.9 + the next read
