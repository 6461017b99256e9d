"""The HTTP edge (advisor.http_edge): one deadline over the whole request — status line and headers included —
for the scraper and the Prometheus client, one redaction placeholder, pluggable transports.

``requests``' read timeout bounds each ``recv`` only: a server that sends its status line and headers one byte
every 0.1 s never trips a 0.5 s read timeout and could hold a request open as long as it liked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler

import pytest
import requests

from advisor.conventions import REASON_TIMEOUT, REASON_TOO_LARGE
from advisor.http_edge import (
    DeadlineAdapter,
    EdgeLimits,
    EdgeResponse,
    EdgeTooLargeError,
    Transport,
    open_stream,
    read_capped,
)
from advisor.redact import REDACTED, redact_secret_url, scrub, url_secrets
from advisor.sources.prometheus import PrometheusSource
from advisor.sources.scrape import scrape

Serve = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Padding: " + b"p" * 60 + b"\r\nContent-Length: 9\r\n\r\n"
"""About 120 bytes: trickled one per 0.1 s it takes 12 s."""


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def trickle_headers(h: BaseHTTPRequestHandler) -> None:
    """Status line and headers one byte every 0.1 s (each well inside a 0.5 s read timeout)."""
    h.close_connection = True
    for i in range(len(HEAD)):
        h.wfile.write(HEAD[i : i + 1])
        h.wfile.flush()
        time.sleep(0.1)
    h.wfile.write(b"vllm:x 1\n")


def test_a_scrape_whose_headers_trickle_past_the_deadline_is_a_timeout(serve: Serve, session: requests.Session) -> None:
    start = time.monotonic()
    result = scrape(serve(trickle_headers) + "/metrics", session, connect_timeout=0.2, read_timeout=0.5)
    elapsed = time.monotonic() - start
    assert not result.ok and result.error_reason == REASON_TIMEOUT
    assert "deadline" in (result.error_message or "")
    # deadline 0.7 s; the trickle lasts 12 s. Generous bound: a loaded machine may be slow, never 12 s slow.
    assert elapsed < 6.0, result


def test_a_prometheus_answer_whose_headers_trickle_past_the_deadline_is_a_timeout(serve: Serve) -> None:
    base = serve(trickle_headers)
    with PrometheusSource(base, connect_timeout=0.2, read_timeout=0.5) as src:
        start = time.monotonic()
        names = src.metric_names('{job="vllm"}')
        elapsed = time.monotonic() - start
    assert not names.ok and names.error_reason == REASON_TIMEOUT
    assert elapsed < 6.0, names


def test_a_session_keeps_its_pool_sizes_when_the_deadline_adapter_is_mounted(serve: Serve) -> None:
    with requests.Session() as s:
        s.mount("http://", requests.adapters.HTTPAdapter(pool_connections=3, pool_maxsize=7))
        body = b"vllm:x 1\n"

        def ok(h: BaseHTTPRequestHandler) -> None:
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)

        url = serve(ok) + "/metrics"
        assert scrape(url, s).ok and scrape(url, s).text == body.decode()
        adapter = s.get_adapter(url)
        assert isinstance(adapter, DeadlineAdapter)
        assert adapter._pool_maxsize == 7  # type: ignore[attr-defined]


class CappedTransport:
    """A transport of our own (not a mocked client library): refuses every answer as too large."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, EdgeLimits]] = []

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
        self.calls.append((method, url, limits))
        raise EdgeTooLargeError(f"body exceeds the cap of {limits.max_bytes} bytes", 200)


def test_the_scraper_takes_any_transport() -> None:
    transport = CappedTransport()
    checked: Transport = transport
    result = scrape("http://u:pw@engine:8000/metrics?k=SECRET", checked, 1.0, 2.0, 123)
    assert result.error_reason == REASON_TOO_LARGE and result.status_code == 200
    assert transport.calls == [("GET", "http://u:pw@engine:8000/metrics?k=SECRET", EdgeLimits(1.0, 2.0, 123))]
    assert "SECRET" not in result.target and "pw" not in result.target


def test_one_placeholder_stands_for_every_secret() -> None:
    url = "https://alice:pa55word@h/metrics?token=t0ken"
    text = "GET /metrics?token=t0ken Authorization: Basic YWxpY2U6cGE1NXdvcmQ= bearer abcd1234 pa55word"
    scrubbed = scrub(text, url_secrets(url))
    for secret in ("t0ken", "YWxpY2U6cGE1NXdvcmQ=", "abcd1234", "pa55word"):
        assert secret not in scrubbed
    assert scrubbed.count(REDACTED) == 4
    assert redact_secret_url("https://hooks.slack.com/services/T0/B0/X").endswith("/" + REDACTED)


def test_the_body_read_stops_one_byte_past_the_cap(serve: Serve, session: requests.Session) -> None:
    """A 2xx without Content-Length whose body is far larger than the cap: the edge takes at most cap + 1 bytes
    off the stream (urllib3's own count, ``raw.tell()``), not whatever one read chunk holds."""
    body = b"x" * (1 << 20)

    def chunked(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))

    limits = EdgeLimits(1.0, 5.0, 1000)
    deadline = time.monotonic() + limits.total_seconds
    response = open_stream(session, "GET", serve(chunked) + "/metrics", limits, deadline)
    with response, pytest.raises(EdgeTooLargeError, match="cap of 1000 bytes"):
        read_capped(response, deadline, limits)
    assert response.raw.tell() <= limits.max_bytes + 1
