"""Issue 13, acceptance 4: the daemon's runtime is built whole and swapped in with one reference.

* A reload that fails late — while building the ack store (a state file that is not JSON) or the notifier (an
  outbox file of a later release) — changes nothing: the next cycles run and their notifications still reach a
  real webhook receiver. (Before, the old notifier and pool were shut down first, so every later cycle failed
  with "cannot schedule new futures after shutdown" while the log said the running config was kept.)
* After a successful reload, a snooze made through the HTTP API silences the snoozed recommendation's next
  notification (an Alertmanager re-send). (Before, the server kept the ack store of the first runtime.)

Everything is real and on loopback: a stand-in vLLM engine, the daemon's own HTTP server, a receiver built on
``http.server``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.server import AdvisorHTTPServer
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import Receiver, reply

pytestmark = pytest.mark.integration

SATURATED = (Phase("saturated", 100_000, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04),)
"""A KV pool that stays saturated with requests waiting: kv_saturation holds from the first window on."""


@pytest.fixture
def saturated() -> Iterator[StandInServer]:
    srv = StandInServer(StandInEngine(phases=SATURATED, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


def _deployment(name: str, url: str) -> dict[str, Any]:
    return {
        "name": name,
        "engine": "vllm",
        "targets": [url],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
    }


def _config(deployments: list[dict[str, Any]], receiver: dict[str, Any], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "scrape_interval": "0.5s",
        "evaluation_window": "2s",
        "deployments": deployments,
        "receivers": [receiver],
        "rules": {"kv_saturation": {"for": "0.5s"}},
    }
    data.update(extra)
    return data


def _cycles_until(svc: Service, done: Callable[[], bool], cycles: int = 60) -> bool:
    """Run cycles (each a real scrape of the stand-in) until ``done()``; counts cycles, not seconds."""
    for _ in range(cycles):
        svc.run_once()
        if done():
            return True
        time.sleep(0.25)
    return done()


def _firing(bodies: list[dict[str, Any]]) -> set[str]:
    return {a["fingerprint"] for b in bodies for a in b["alerts"] if a["status"] == "firing"}


@pytest.mark.parametrize("late", ["ack store", "notifier", "notifier on the running outbox folder"])
def test_a_reload_that_fails_late_leaves_the_old_runtime_fully_working(
    late: str, saturated: StandInServer, webhook_receiver: Receiver, tmp_path: Path
) -> None:
    receiver = {"name": "ops", "url": webhook_receiver.url, "backoff_seconds": "0.1s"}
    good = _config([_deployment("chat-8b", saturated.url())], receiver, state_file=str(tmp_path / "state.json"))
    if late == "notifier on the running outbox folder":
        good["outbox_dir"] = str(tmp_path / "outbox")
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(good), collector, metrics, base_dir=tmp_path)
    try:
        svc.run_once()  # a first cycle under the running config
        broken_dir = tmp_path / "broken"
        broken_dir.mkdir()
        bad = dict(good, evaluation_window="7s")
        if late == "ack store":  # the file is there and writable; only reading it (AckStore) fails
            (broken_dir / "state.json").write_text("{this is not json")
            bad["state_file"] = str(broken_dir / "state.json")
        elif late == "notifier":  # the folder is fine; only the receiver's outbox file (read by the notifier) is broken
            (broken_dir / "ops.outbox.json").write_text('{"version": 999, "receiver": "ops"}')  # a later release's
            bad["outbox_dir"] = str(broken_dir)
        else:  # one outbox folder (locked by the running notifier): a new receiver's outbox file there is broken
            (tmp_path / "outbox" / "broken.outbox.json").write_text('{"version": 999, "receiver": "broken"}')
            bad["receivers"] = [receiver, dict(receiver, name="broken")]
        cfg_path = tmp_path / "advisor.yaml"
        cfg_path.write_text(yaml.safe_dump(bad))

        ok, message = svc.reload(cfg_path)

        assert not ok and "broken" in message, message
        assert registry.get_sample_value("advisor_config_last_reload_successful") == 0.0
        # the old runtime keeps working: cycles run and the notification reaches the receiver
        assert _cycles_until(svc, lambda: webhook_receiver.wait_for(lambda b: bool(_firing(b)), 0.1))
        assert svc.cfg.evaluation_window == 2.0  # the running config, not half of the new one
        assert svc.state_file == tmp_path / "state.json"
        assert json.loads((tmp_path / "state.json").read_text())["recommendations"]  # persisted by the old one
        # and a good reload still works afterwards, one with other receivers included (a new notifier takes over
        # the outbox folder, if any, from the running one)
        cfg_path.write_text(yaml.safe_dump(dict(good, evaluation_window="3s")))
        assert svc.reload(cfg_path)[0]
        assert svc.cfg.evaluation_window == 3.0
        cfg_path.write_text(yaml.safe_dump(dict(good, receivers=[dict(receiver, backoff_seconds="0.2s")])))
        ok, message = svc.reload(cfg_path)
        assert ok, message
        svc.run_once()
    finally:
        svc.close(5)


class _AlertmanagerStandIn:
    """Records each POST to ``/api/v2/alerts`` (a JSON array of alerts), as Alertmanager would accept it."""

    def __init__(self) -> None:
        self.posts: list[list[dict[str, Any]]] = []
        self.lock = threading.Lock()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length", "0")))
        if h.path.startswith("/api/v2/alerts"):
            with self.lock:
                self.posts.append(json.loads(raw))
        reply(h, 200, b"", "application/json")

    def since(self, n: int) -> list[list[dict[str, Any]]]:
        with self.lock:
            return list(self.posts[n:])

    def wait(self, pred: Callable[[], bool], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return True
            time.sleep(0.05)
        return pred()


def test_a_snooze_made_through_the_api_after_a_reload_silences_the_next_notification(
    saturated: StandInServer,
    http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str],
    tmp_path: Path,
) -> None:
    am = _AlertmanagerStandIn()
    receiver = {
        "name": "am",
        "type": "alertmanager",
        "url": http_server(am.handle),
        "resend_interval": "0.2s",
        "backoff_seconds": "0.1s",
    }
    # two deployments on the same engine: "snoozed" gets the snooze, "control" shows re-sends keep going
    deployments = [_deployment("snoozed", saturated.url()), _deployment("control", saturated.url())]
    data = _config(deployments, receiver, state_file=str(tmp_path / "state.json"))
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(data), collector, metrics, base_dir=tmp_path)
    srv = AdvisorHTTPServer(("127.0.0.1", 0), svc, registry)
    srv.start_background()
    try:
        cfg_path = tmp_path / "advisor.yaml"
        # another state file: the reload builds a new ack store (and so a new notifier consulting it)
        cfg_path.write_text(yaml.safe_dump(dict(data, state_file=str(tmp_path / "state-2.json"))))
        ok, message = svc.reload(cfg_path)
        assert ok, message

        def open_ids(deployment: str) -> set[str]:
            return {
                r.id
                for d in (svc.result.deployments if svc.result else ())
                if d.name == deployment
                for r in d.recommendations
            }

        def sent(deployment: str) -> bool:
            return any(a["labels"]["deployment"] == deployment for p in am.since(0) for a in p)

        assert _cycles_until(svc, lambda: bool(open_ids("snoozed")) and sent("snoozed") and sent("control"))
        # no more cycles from here: whatever reaches the receiver now is a re-send of what is open
        snoozed = open_ids("snoozed")
        for rec_id in snoozed:
            r = requests.post(
                f"{srv.url()}/api/v1/recommendations/{rec_id}/snooze",
                json={"duration": "1h", "reason": "resize booked"},
                timeout=5,
            )
            assert r.status_code == 200, r.text

        def resent_control(n: int, mark: int) -> bool:
            return sum(any(a["labels"]["deployment"] == "control" for a in p) for p in am.since(mark)) >= n

        # one receiver worker posts in turn: a re-send built before the snooze is at most the next post
        first = len(am.since(0))
        assert am.wait(lambda: resent_control(1, first)), am.since(first)
        mark = len(am.since(0))
        assert am.wait(lambda: resent_control(3, mark)), am.since(mark)  # re-sends go on, for what is not snoozed
        after = am.since(mark)
        leaked = [a["labels"] for p in after for a in p if a["labels"]["deployment"] == "snoozed"]
        assert not leaked, f"snoozed recommendations {sorted(snoozed)} were re-sent after the snooze: {leaked}"
    finally:
        srv.shutdown()
        srv.server_close()
        svc.close(5)
