"""Notifications through the HTTP edge (issue 12): one deadline over the whole request, a byte cap on the response
body, one redaction — against real receivers on loopback that misbehave on purpose.

``requests``' own timeout bounds each ``recv`` only: a receiver that sends its status line and headers one byte
every 0.1 s never trips it and held a notification for as long as it liked.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from advisor.notify.outbox import ERROR_BODY_BYTES, outbox_file
from advisor.notify.receivers import IDEMPOTENCY_HEADER, idempotency_key
from tests.notify.conftest import rec

StartServer = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Padding: " + b"p" * 60 + b"\r\nContent-Length: 2\r\n\r\n"
"""About 120 bytes: trickled one per 0.1 s they take 12 s."""

DEADLINE = 1.0
FAST = {"timeout_seconds": DEADLINE, "backoff_seconds": 0.02, "max_backoff_seconds": 0.1}
KINDS = ["webhook", "slack", "alertmanager"]


@dataclass
class Misbehaving:
    """A receiver whose first ``bad`` answers come from ``answer_badly``; later ones are a plain 200."""

    answer_badly: Callable[[BaseHTTPRequestHandler], None]
    bad: int = 1
    url: str = ""
    keys: list[str | None] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers.get("Content-Length", "0")))
        with self.lock:
            self.keys.append(h.headers.get(IDEMPOTENCY_HEADER))
            self.arrived.append(time.monotonic())
            n = len(self.keys)
        h.close_connection = True
        if n <= self.bad:
            self.answer_badly(h)
            return
        h.send_response(200)
        h.send_header("Content-Length", "2")
        h.end_headers()
        h.wfile.write(b"ok")

    def count(self) -> int:
        with self.lock:
            return len(self.keys)

    def wait(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count() >= n:
                return True
            time.sleep(0.01)
        return self.count() >= n


def start(http_server: StartServer, behaviour: Misbehaving) -> Misbehaving:
    behaviour.url = http_server(behaviour.handle) + "/hook"
    return behaviour


def config(kind: str, url: str, **kw: Any) -> ReceiverConfig:
    return ReceiverConfig.model_validate({"name": "ops", "type": kind, "url": url, **FAST, **kw})


def trickle_head(h: BaseHTTPRequestHandler) -> None:
    """Status line and headers one byte every 0.1 s (each byte well inside the per-read timeout)."""
    try:
        for i in range(len(HEAD)):
            h.wfile.write(HEAD[i : i + 1])
            h.wfile.flush()
            time.sleep(0.1)
        h.wfile.write(b"ok")
    except OSError:  # the advisor hung up at its deadline
        pass


@pytest.mark.parametrize("kind", KINDS)
def test_a_receiver_trickling_its_status_line_is_abandoned_at_the_deadline_and_retried(
    http_server: StartServer, tmp_path: Path, kind: str
) -> None:
    hook = start(http_server, Misbehaving(trickle_head))
    n = build_notifier([config(kind, hook.url)], tmp_path, None)
    try:
        started = time.monotonic()
        n.submit("opened", rec(1))
        # the retry arrives once the first attempt was abandoned; the trickle alone would last 12 s
        assert hook.wait(2, timeout=8.0), "the first attempt was not abandoned at the deadline"
        abandoned_after = hook.arrived[1] - started
        assert n.flush(5)
    finally:
        n.close(2)
    # deadline 1 s plus a backoff of at most 0.1 s; generous jitter for a loaded machine, never 12 s
    assert abandoned_after < DEADLINE + 2.0
    key = idempotency_key("opened", rec(1))
    assert hook.keys[:2] == [key, key]  # the same notification again: kept, not lost
    stats = n.stats()["ops"]
    assert (stats.sent, stats.failed, stats.dropped, stats.queued) == (1, 0, 0, 0)
    (sent,) = (r for r in stats.recent if r.outcome == "sent")
    assert sent.attempts == 2


def test_a_notification_whose_receiver_keeps_trickling_stays_in_the_outbox(
    http_server: StartServer, tmp_path: Path
) -> None:
    hook = start(http_server, Misbehaving(trickle_head, bad=1_000))
    n = build_notifier([config("webhook", hook.url)], tmp_path, None)
    try:
        n.submit("opened", rec(1))
        assert hook.wait(2, timeout=8.0)
    finally:
        n.close(0.2)
    saved = json.loads(outbox_file(tmp_path, "ops").read_text())
    (entry,) = saved["pending"]
    assert entry["key"] == idempotency_key("opened", rec(1)) and entry["attempts"] >= 1
    assert "timeout" in entry["last_error"] and "deadline" in entry["last_error"]
    assert n.stats()["ops"].failed == 0


HUGE = 1 << 30
"""A body of 1 GiB: the advisor reads at most ERROR_BODY_BYTES of it."""


def huge_body(hook: Misbehaving, code: int, chunked: bool) -> Callable[[BaseHTTPRequestHandler], None]:
    """``code`` with a 1 GiB body written as fast as the advisor takes it; ``hook.written`` gets the bytes sent."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(code)
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(HUGE))
        h.end_headers()
        block = b"x" * 65536
        written = 0
        try:
            while written < HUGE:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                written += len(block)
        except OSError:  # the advisor hung up
            pass
        with hook.lock:
            hook.written.append(written)

    return answer


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
@pytest.mark.parametrize(("code", "outcome"), [(200, "sent"), (400, "failed"), (503, "failed")])
def test_a_huge_response_body_is_not_read_past_the_cap(
    http_server: StartServer, tmp_path: Path, code: int, outcome: str, chunked: bool
) -> None:
    hook = Misbehaving(lambda h: None, bad=1_000)
    hook.answer_badly = huge_body(hook, code, chunked)
    start(http_server, hook)
    n = build_notifier([config("webhook", hook.url, max_attempts=2)], tmp_path, None)
    try:
        n.submit("opened", rec(1))
        assert n.flush(20)
    finally:
        n.close(2)
    stats = n.stats()["ops"]
    (result,) = stats.recent
    assert result.outcome == outcome and result.status_code == code
    # 2xx: acknowledged (the body is not needed); 4xx: not retried; 503: retried up to max_attempts
    assert result.attempts == {200: 1, 400: 1, 503: 2}[code]
    if code != 200:
        assert result.error is not None and result.error.startswith(f"HTTP {code}: x")
        assert len(result.error) <= len(f"HTTP {code}: ") + ERROR_BODY_BYTES
    assert hook.wait(result.attempts, 1.0)
    deadline = time.monotonic() + 5
    while len(hook.written) < result.attempts and time.monotonic() < deadline:
        time.sleep(0.01)
    # the advisor hung up long before 1 GiB: what the server wrote is at most the loopback socket buffers
    assert hook.written and max(hook.written) < 64 << 20, hook.written


def trickle_error_body(h: BaseHTTPRequestHandler) -> None:
    """A 503 whose endless body arrives one byte every 0.05 s (1 KiB of it would take 51 s)."""
    h.send_response(503)
    h.send_header("Content-Length", str(HUGE))
    h.end_headers()
    try:
        for _ in range(2_000):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.05)
    except OSError:
        pass


def test_reading_an_error_body_ends_at_the_deadline(http_server: StartServer, tmp_path: Path) -> None:
    hook = start(http_server, Misbehaving(trickle_error_body))
    n = build_notifier([config("webhook", hook.url)], tmp_path, None)
    try:
        started = time.monotonic()
        n.submit("opened", rec(1))
        assert hook.wait(2, timeout=8.0), "the error body was read past the deadline"
        retried_after = hook.arrived[1] - started
        assert n.flush(5)
    finally:
        n.close(2)
    assert retried_after < DEADLINE + 2.0
    stats = n.stats()["ops"]
    assert (stats.sent, stats.failed) == (1, 0)


ECHOED = (
    "upstream refused https://relay.internal/forward?token=RELAYTOKEN0001&x=1 "
    "for https://svc:SVCPASSWORD0002@relay.internal/x "
    'with {"Authorization": "Bearer OTHERBEARER0003"} '
    "authorization: bearer lowercase0004 "
    "and POST /hook?token=RECEIVERTOKEN0005"
)
LEAKS = ("RELAYTOKEN0001", "SVCPASSWORD0002", "OTHERBEARER0003", "lowercase0004", "RECEIVERTOKEN0005", "MINE0006")


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_body_echoing_urls_and_credentials_is_redacted_in_logs_and_outcomes(
    http_server: StartServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.DEBUG)

    def echo(h: BaseHTTPRequestHandler) -> None:
        code = 503 if hook.count() == 1 else 400  # one retry (the outbox file holds the error), then rejected
        body = ECHOED.encode()
        h.send_response(code)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    hook = start(http_server, Misbehaving(echo, bad=2))
    url = hook.url + "?token=RECEIVERTOKEN0005"
    n = build_notifier([config(kind, url, bearer_token="MINE0006")], tmp_path, None)
    pending_errors: list[str] = []
    try:
        n.submit("opened", rec(1))
        deadline = time.monotonic() + 5
        while not pending_errors and time.monotonic() < deadline:  # the retry's error, as the file keeps it
            saved = json.loads(outbox_file(tmp_path, "ops").read_text())
            pending_errors = [e["last_error"] for e in saved["pending"] if e.get("last_error")]
            time.sleep(0.005)
        assert n.flush(5)
    finally:
        n.close(2)
    stats = n.stats()["ops"]
    (failed,) = stats.recent
    assert failed.outcome == "failed" and failed.status_code == 400 and failed.attempts == 2
    assert failed.error is not None and "upstream refused https://relay.internal/forward?<redacted>" in failed.error
    assert "Bearer <redacted>" in failed.error and "https://<redacted>@relay.internal/x" in failed.error
    assert pending_errors and "HTTP 503" in pending_errors[0]
    shown = [caplog.text, repr(stats), failed.error, *pending_errors, outbox_file(tmp_path, "ops").read_text()]
    for text in shown:
        for leak in LEAKS:
            assert leak not in text
