"""The daemon end to end on loopback: a stand-in engine, broken targets, a real webhook receiver."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import Receiver, reply

pytestmark = pytest.mark.integration

FAST_RAMP = (
    Phase("idle", 2, 0.05, 2, 0, 1.0, 1000, 200, 0, 0.1, 0.02),
    Phase("saturated", 5, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04),
    Phase("recovered", 10_000, 0.3, 20, 0, 2.0, 1000, 200, 0, 0.1, 0.02),
)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def _metrics(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = requests.get(url + "/metrics", timeout=5).text
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _value(m: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    want = set(labels.items())
    for (n, ls), v in m.items():
        if n == name and want <= set(ls):
            return v
    return None


@pytest.fixture
def standin() -> Iterator[StandInServer]:
    srv = StandInServer(StandInEngine(phases=FAST_RAMP, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_daemon_fires_and_resolves_through_a_webhook_while_broken_targets_are_counted(
    standin: StandInServer,
    webhook_receiver: Receiver,
    http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str],
) -> None:
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(2.0)
        with contextlib.suppress(OSError):  # the advisor gave up long ago, as it should
            reply(h, 200, b"vllm:num_requests_running 1\n")

    refused = f"http://127.0.0.1:{_free_port()}/metrics"
    timeout = http_server(slow) + "/metrics"
    error500 = http_server(lambda h: reply(h, 500, b"boom")) + "/metrics"
    garbage = http_server(lambda h: reply(h, 200, b"this is {not prometheus\n")) + "/metrics"
    empty = http_server(lambda h: reply(h, 200, b"")) + "/metrics"
    large = http_server(lambda h: reply(h, 200, b"# " + b"x" * 40000 + b"\n")) + "/metrics"
    data: dict[str, Any] = {
        "scrape_interval": "0.5s",
        "evaluation_window": "2s",
        "scrape": {"connect_timeout": "0.2s", "read_timeout": "0.3s", "max_bytes": 32768},  # fits the interval
        "deployments": [
            {
                "name": "chat-8b",
                "engine": "vllm",
                "targets": [standin.url()],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
            },
            {
                "name": "broken",
                "engine": "vllm",
                "targets": [refused, timeout, error500, garbage, empty, large],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
            },
        ],
        "receivers": [{"name": "ops", "url": webhook_receiver.url, "backoff_seconds": "0.1s"}],
        "rules": {"kv_saturation": {"for": "1s"}, "resolve_for": "1s"},
    }
    cfg = parse_config(data)
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    stop = threading.Event()
    urls: list[str] = []
    t = threading.Thread(
        target=run_daemon,
        args=(svc, registry, "127.0.0.1:0"),
        kwargs={"stop_event": stop, "on_listening": urls.append},
        daemon=True,
    )
    t.start()
    try:

        def opened_then_resolved(bodies: list[dict[str, Any]]) -> bool:
            firing = {a["fingerprint"] for b in bodies for a in b["alerts"] if a["status"] == "firing"}
            resolved = {a["fingerprint"] for b in bodies for a in b["alerts"] if a["status"] == "resolved"}
            return bool(firing & resolved)

        assert webhook_receiver.wait_for(opened_then_resolved, timeout=30), webhook_receiver.bodies
        firing = [b for b in webhook_receiver.bodies if b["status"] == "firing"]
        first = firing[0]["alerts"][0]
        assert first["labels"]["deployment"] == "chat-8b"
        assert first["labels"]["problem"] == "saturation" and first["labels"]["id"] == first["fingerprint"]
        assert first["annotations"]["rule"] == "kv_saturation"
        resolved = [
            a
            for b in webhook_receiver.bodies
            for a in b["alerts"]
            if a["status"] == "resolved" and a["fingerprint"] == first["fingerprint"]
        ]
        assert resolved and resolved[0]["startsAt"] == first["startsAt"]
        assert resolved[0]["endsAt"] != "0001-01-01T00:00:00Z"

        m = _metrics(urls[0])
        for target, reason in [
            (refused, "connection_refused"),
            (timeout, "timeout"),
            (error500, "http_status"),
            (garbage, "parse_error"),
            (empty, "unrecognized"),  # valid (empty) text with no engine family: not a parse error
            (large, "too_large"),
        ]:
            assert _value(m, "advisor_target_up", deployment="broken", target=target) == 0.0, target
            errors = _value(m, "advisor_scrape_errors_total", deployment="broken", target=target, reason=reason)
            assert errors is not None and errors >= 1, (target, reason)
        assert _value(m, "advisor_target_up", deployment="chat-8b", target=standin.url()) == 1.0
        assert _value(m, "advisor_requests_running", deployment="chat-8b") == 20.0  # the recovered phase
        assert _value(m, "advisor_deployment_state", deployment="broken", state="unavailable") == 1.0
        # unknown is never 0: the broken deployment exports no KV usage at all
        assert _value(m, "advisor_kv_cache_usage_ratio", deployment="broken") is None
        assert _value(m, "advisor_recommendation_active", deployment="chat-8b", dial="kv_cache_dtype") == 0.0
        health = requests.get(urls[0] + "/healthz", timeout=5)
        assert health.status_code == 200
    finally:
        stop.set()
        t.join(timeout=15)
    assert not t.is_alive()
