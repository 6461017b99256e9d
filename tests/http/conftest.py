"""A running daemon on loopback against a stand-in engine whose KV pool stays saturated, so a
recommendation is open; the HTTP tests read and write through its real server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer

SATURATED = (Phase("saturated", 100_000, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04),)


def config(url: str, state_file: Path | None = None, **extra: Any) -> dict[str, Any]:
    """One deployment on the stand-in, fast intervals, kv_saturation firing after 0.5 s."""
    data: dict[str, Any] = {
        "scrape_interval": "0.5s",
        "evaluation_window": "2s",
        "deployments": [
            {
                "name": "chat-8b",
                "engine": "vllm",
                "targets": [url],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
            }
        ],
        "rules": {"kv_saturation": {"for": "0.5s"}, "resolve_for": "1s"},
    }
    if state_file is not None:
        data["state_file"] = str(state_file)
    data.update(extra)
    return data


@dataclass
class Daemon:
    url: str
    service: Service
    stop: threading.Event
    thread: threading.Thread

    def open_recommendations(self) -> list[dict[str, Any]]:
        body = requests.get(self.url + "/api/v1/recommendations?status=open", timeout=30).json()
        recs: list[dict[str, Any]] = body["recommendations"]
        return recs

    def wait_open(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            recs = self.open_recommendations()
            if recs:
                return recs
            time.sleep(0.2)
        raise AssertionError("no recommendation opened")


def start_daemon(data: dict[str, Any]) -> Daemon:
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(data), collector, metrics)
    stop = threading.Event()
    urls: list[str] = []
    t = threading.Thread(
        target=run_daemon,
        args=(svc, registry, "127.0.0.1:0"),
        kwargs={"stop_event": stop, "on_listening": urls.append},
        daemon=True,
    )
    t.start()
    deadline = time.monotonic() + 10
    while not urls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert urls, "the daemon did not start listening"
    return Daemon(urls[0], svc, stop, t)


def stop_daemon(d: Daemon) -> None:
    d.stop.set()
    d.thread.join(timeout=15)
    assert not d.thread.is_alive()


@pytest.fixture(scope="module")
def saturated_standin() -> Iterator[StandInServer]:
    srv = StandInServer(StandInEngine(phases=SATURATED, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def daemon(saturated_standin: StandInServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon with a state file and an open recommendation."""
    state = tmp_path_factory.mktemp("state") / "state.json"
    d = start_daemon(config(saturated_standin.url(), state))
    try:
        d.wait_open()
        yield d
    finally:
        stop_daemon(d)


@pytest.fixture(scope="module")
def api() -> Iterator[Daemon]:
    """A daemon on a saturated stand-in engine, for the ``POST /api/v1/plan`` tests (one per test module)."""
    srv = StandInServer(StandInEngine(phases=SATURATED, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    d = start_daemon(config(srv.url()))
    try:
        yield d
    finally:
        stop_daemon(d)
        srv.shutdown()
        srv.server_close()
