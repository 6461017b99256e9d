"""Issue 6 acceptance 3 on a running daemon: a receiver URL with a token and a target URL with credentials
never appear in logs, /api/v1/*, the status page or /metrics, while notifications are delivered."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
import requests

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import Receiver

pytestmark = pytest.mark.integration

SATURATED = Phase("saturated", 10_000, 0.97, 48, 12, 3.0, 1500, 300, 1.0, 0.5, 0.05)
SECRETS = ("T0KENPATH", "hunter2", "opsuser", "s3cretpw", "qtoken")


@pytest.fixture
def engine() -> Iterator[StandInServer]:
    srv = StandInServer(StandInEngine(phases=(SATURATED,), speed=1.0, num_gpu_blocks=2000))
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_secrets_never_leave_the_daemon(
    engine: StandInServer, webhook_receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hook = webhook_receiver.url + "/T0KENPATH?key=hunter2"
    target = engine.url().replace("http://", "http://opsuser:s3cretpw@") + "?t=qtoken"
    cfg = parse_config(
        {
            "scrape_interval": "0.5s",
            "evaluation_window": "2s",
            "deployments": [
                {
                    "name": "chat-8b",
                    "targets": [target],
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ],
            "receivers": [{"name": "ops", "url": hook, "backoff_seconds": "0.1s"}],
            "rules": {"kv_saturation": {"for": "0.5s"}},
        }
    )
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
        assert webhook_receiver.wait_for(lambda bodies: bool(bodies), timeout=20), "no notification delivered"
        pages = ["/", "/metrics", "/api/v1/deployments", "/api/v1/recommendations", "/api/v1/openapi.json"]
        text = "".join(requests.get(urls[0] + p, timeout=5).text for p in pages)
        assert "chat-8b" in text  # the pages do show the deployment
        for secret in SECRETS:
            assert secret not in text, secret
            assert secret not in caplog.text, secret
    finally:
        stop.set()
        t.join(timeout=15)
