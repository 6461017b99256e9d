"""Fixtures for the notifier tests: a recording webhook receiver on loopback, a fake clock, recommendations."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from advisor.domain import Recommendation
from advisor.notify.receivers import IDEMPOTENCY_HEADER
from tests.conftest import reply

StartServer = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


@dataclass(frozen=True)
class Hit:
    """One request the hook received and the status it answered."""

    path: str
    headers: dict[str, str]
    raw: bytes
    code: int
    at: float

    @property
    def key(self) -> str | None:
        return self.headers.get(IDEMPOTENCY_HEADER)

    def json(self) -> Any:
        return json.loads(self.raw)


@dataclass
class Hook:
    """A webhook receiver. While ``outage`` is set it answers 503; ``script`` gives the next codes (and
    ``error_body`` the body of a non-2xx answer); ``clock`` stamps each hit (a fake clock in some tests)."""

    url: str = ""
    hits: list[Hit] = field(default_factory=list)
    outage: bool = False
    script: list[int] = field(default_factory=list)
    error_body: bytes = b"unavailable"
    clock: Callable[[], float] = time.time
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked(self) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if 200 <= h.code < 300]

    def count(self) -> int:
        with self.lock:
            return len(self.hits)

    def wait(self, pred: Callable[[Hook], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self):
                return True
            time.sleep(0.02)
        return pred(self)


@pytest.fixture
def hook(http_server: StartServer) -> Hook:
    """A recording webhook receiver on 127.0.0.1 (its URL ends in ``/hook``)."""
    h = Hook()

    def handle(req: BaseHTTPRequestHandler) -> None:
        raw = req.rfile.read(int(req.headers.get("Content-Length", "0")))
        with h.lock:
            code = h.script.pop(0) if h.script else (503 if h.outage else 200)
            h.hits.append(Hit(req.path, dict(req.headers.items()), raw, code, h.clock()))
            body = b"ok" if code < 300 else h.error_body
        reply(req, code, body)

    h.url = http_server(handle) + "/hook"
    return h


class FakeClock:
    """Unix time that moves only when ``sleep`` is called (thread-safe)."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.now = start
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds
            self.slept.append(seconds)
        time.sleep(0.001)  # let the other threads run


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


BASE = Recommendation(
    id="0000000000000000",
    deployment="chat-8b",
    rule="kv_saturation",
    dial="max_num_seqs",
    action="decrease",
    current=256,
    suggested=192,
    flag="--max-num-seqs 192",
    severity="warning",
    confidence=0.8,
    summary="KV cache pool saturated on chat-8b: lower max-num-seqs to 192",
    description="KV cache usage 97% with 12 requests waiting and 0.4 preemptions/s over 5m.",
    runbook="https://example.invalid/runbook#kv-saturation",
    opened_at=1_790_000_000.0,
    predicted_effect={"preemptions_per_second": {"before": 0.4, "after": 0.0}, "concurrency_ceiling": {"before": 9.5}},
    evidence={"kv_cache_usage_ratio": 0.97, "requests_waiting": 12, "window_seconds": 300},
)


def rec(i: int, opened_at: float = 1_790_000_000.0, **kw: Any) -> Recommendation:
    """Recommendation number ``i`` (distinct id and dial)."""
    return replace(BASE, id=f"{i:016x}", dial=f"dial_{i}", opened_at=opened_at + i, **kw)
