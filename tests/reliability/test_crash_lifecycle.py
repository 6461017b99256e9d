"""Issue 14, the notifier across a stop and a reload, against the real daemon (``capacity-advisor run``) with a
recording webhook receiver on loopback that is down (503) or hangs:

* SIGTERM with a receiver hanging exits 0 within the bound (flush at most 10 s, well below the shipped unit's
  ``TimeoutStopSec=30s``); the outbox file keeps the undelivered notification and a restart delivers it, under
  the same idempotency key. Without ``outbox_dir`` the stop says truthfully how many it dropped.
* A reload never waits on a receiver: with one hanging, SIGHUP swaps the config at once.
* A deployment a reload removes while it has an open recommendation: the recommendation resolves with
  ``resolved_reason`` ``removed``, every series of the deployment leaves ``/metrics``, and the state file drops it.
* Without ``outbox_dir``, a reload during an outage keeps the queued notifications of the receivers that stay
  and counts those of a receiver it removed as ``dropped`` (``advisor_notifications_total``).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from tests.reliability.crash_support import (
    Daemon,
    Delivered,
    FlipTarget,
    RecordingReceiver,
    daemon,
    deployment,
    outbox_pending,
    state,
    write_config,
)

STOP_BOUND = 25.0
"""Seconds a SIGTERM may take with a receiver hanging: the 10 s flush, 1 s for the request in flight and the
cycle, with room for a loaded machine; the unit allows 30 s, and before issue 14 it took 31 s."""


@pytest.fixture
def target() -> Iterator[FlipTarget]:
    t = FlipTarget()
    t.set(True)
    yield t
    t.close()


@pytest.fixture
def receiver() -> Iterator[RecordingReceiver]:
    r = RecordingReceiver().start()
    yield r
    r.stop()


def _metric(url: str, name: str, **labels: str) -> float | None:
    for line in requests.get(url + "/metrics", timeout=5).text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(
            f'{k}="{v}"' in line for k, v in labels.items()
        ):
            return float(line.rsplit(" ", 1)[1])
    return None


def _wait(pred: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.integration
@pytest.mark.parametrize("persisted", [True, False], ids=["outbox_dir", "in memory"])
def test_sigterm_with_a_receiver_hanging_stops_within_the_bound_and_keeps_the_rest(
    tmp_path: Path, target: FlipTarget, receiver: RecordingReceiver, persisted: bool
) -> None:
    outbox = tmp_path / "outbox" if persisted else None
    cfg = write_config(
        tmp_path / "advisor.yaml", [deployment("chat", target.url())], receiver.url, outbox, timeout_seconds="60s"
    )
    receiver.mode = "hang"
    d = Daemon(cfg)
    try:
        d.wait_ready()
        assert _wait(lambda: receiver.posts >= 1, 20), d.log()  # the firing is in flight, hanging
        started = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.wait(60)
        took = time.monotonic() - started
    finally:
        d.kill()
    assert rc == 0, d.log()
    assert took < STOP_BOUND, f"the stop took {took:.1f}s with a receiver hanging"
    if not persisted:
        assert re.search(r"notify ops: 1 notification\(s\) dropped", d.log()), d.log()
        assert "kept in the outbox" not in d.log()
        return
    assert outbox is not None
    (key,) = outbox_pending(outbox)  # the undelivered firing stays in the outbox file
    receiver.mode = "ok"
    receiver.released.set()
    with daemon(cfg) as again:
        again.wait_ready()
        assert receiver.wait_for(lambda a: any(x.key == key for x in a), 20), again.log()
    assert [a.key for a in receiver.snapshot()] == [key]  # the same alert, no other


@pytest.mark.integration
def test_a_reload_never_waits_on_a_hanging_receiver(
    tmp_path: Path, target: FlipTarget, receiver: RecordingReceiver
) -> None:
    outbox = tmp_path / "outbox"
    path = tmp_path / "advisor.yaml"
    cfg = write_config(path, [deployment("chat", target.url())], receiver.url, outbox, timeout_seconds="60s")
    receiver.mode = "hang"
    with daemon(cfg) as d:
        url = d.wait_ready()
        assert _wait(lambda: receiver.posts >= 1, 20), d.log()
        write_config(path, [deployment("chat", target.url())], receiver.url, outbox, max_backoff_seconds="5s")
        sent = time.monotonic()
        d.signal(signal.SIGHUP)
        assert _wait(lambda: "config reloaded" in d.log(), 30), d.log()
        took = time.monotonic() - sent
        assert took < 6.0, f"the reload waited {took:.1f}s on the receiver"
        assert _metric(url, "advisor_config_last_reload_successful") == 1.0
        # the new receivers deliver what the old ones held, once the receiver answers
        (key,) = outbox_pending(outbox)
        receiver.mode = "ok"
        receiver.released.set()
        assert receiver.wait_for(lambda a: any(x.key == key for x in a), 20), d.log()


@pytest.mark.integration
def test_a_reload_without_an_outbox_keeps_the_queue_of_the_receivers_that_stay(
    tmp_path: Path, target: FlipTarget, receiver: RecordingReceiver
) -> None:
    audit = RecordingReceiver(mode="fail").start()
    path = tmp_path / "advisor.yaml"
    deps = [deployment("chat", target.url())]
    cfg = write_config(path, deps, receiver.url, None, max_backoff_seconds="0.3s")
    doc = yaml.safe_load(cfg.read_text())
    doc["receivers"].append({"name": "audit", "url": audit.url, "backoff_seconds": "0.1s"})
    path.write_text(yaml.safe_dump(doc))
    receiver.mode = "fail"
    try:
        with daemon(path) as d:
            url = d.wait_ready()
            assert _wait(lambda: receiver.posts >= 2 and audit.posts >= 2, 20), d.log()  # queued, retried
            write_config(path, deps, receiver.url, None, max_backoff_seconds="0.4s")  # audit removed, ops stays
            d.signal(signal.SIGHUP)
            assert _wait(lambda: "config reloaded" in d.log(), 30), d.log()
            assert _metric(url, "advisor_notifications_total", receiver="audit", outcome="dropped") == 1.0
            receiver.mode = "ok"
            assert receiver.wait_for(lambda a: any(x.status == "firing" for x in a), 20), d.log()
            assert _metric(url, "advisor_notifications_total", receiver="ops", outcome="dropped") in (None, 0.0)
            assert _metric(url, "advisor_notifications_total", receiver="ops", outcome="sent") == 1.0
    finally:
        audit.stop()


@pytest.mark.integration
def test_a_deployment_a_reload_removes_resolves_with_reason_removed_and_leaves_metrics_and_state(
    tmp_path: Path, target: FlipTarget, receiver: RecordingReceiver
) -> None:
    path = tmp_path / "advisor.yaml"
    both = [deployment("chat", target.url()), deployment("code", target.url())]
    write_config(path, both, receiver.url, tmp_path / "outbox")
    state_file = tmp_path / "state.json"

    def fired(alerts: list[Delivered]) -> set[str]:
        return {a.fingerprint for a in alerts if a.status == "firing"}

    with daemon(path) as d:
        url = d.wait_ready()
        assert receiver.wait_for(lambda a: len(fired(a)) == 2, 20), d.log()
        assert _wait(lambda: len(state(state_file).get("recommendations", [])) == 2, 10)
        by_dep = {r["deployment"]: r["id"] for r in state(state_file)["recommendations"]}
        assert 'deployment="chat"' in requests.get(url + "/metrics", timeout=5).text
        write_config(path, both[1:], receiver.url, tmp_path / "outbox")  # chat removed, code stays
        d.signal(signal.SIGHUP)
        assert receiver.wait_for(lambda a: any(x.status == "resolved" for x in a), 20), d.log()
        time.sleep(0.6)  # a few more cycles
        (resolved,) = [a for a in receiver.snapshot() if a.status == "resolved"]
        assert (resolved.fingerprint, resolved.reason) == (by_dep["chat"], "removed")
        exposition = requests.get(url + "/metrics", timeout=5).text
        assert 'deployment="chat"' not in exposition  # advisor_recommendation_active and every other series
        assert re.search(r'advisor_recommendation_active\{[^}]*deployment="code"[^}]*\} 1\.0', exposition)
        assert [r["id"] for r in state(state_file)["recommendations"]] == [by_dep["code"]]
    with daemon(path) as again:  # a restart resolves nothing twice
        again.wait_ready()
        time.sleep(1.0)
    assert [a.fingerprint for a in receiver.snapshot() if a.status == "resolved"] == [by_dep["chat"]]


@pytest.mark.integration
def test_a_deployment_removed_while_the_advisor_was_down_resolves_at_the_restart(
    tmp_path: Path, target: FlipTarget, receiver: RecordingReceiver
) -> None:
    path = tmp_path / "advisor.yaml"
    both = [deployment("chat", target.url()), deployment("code", target.url())]
    write_config(path, both, receiver.url, tmp_path / "outbox")
    state_file = tmp_path / "state.json"
    with daemon(path) as d:
        d.wait_ready()
        assert receiver.wait_for(lambda a: len({x.fingerprint for x in a}) == 2, 20), d.log()
        assert _wait(lambda: len(state(state_file).get("recommendations", [])) == 2, 10)
    by_dep = {r["deployment"]: r["id"] for r in state(state_file)["recommendations"]}
    write_config(path, both[1:], receiver.url, tmp_path / "outbox")  # chat removed while it was down
    with daemon(path) as again:
        again.wait_ready()
        assert receiver.wait_for(lambda a: any(x.status == "resolved" for x in a), 20), again.log()
        time.sleep(0.6)
    resolved = [(a.fingerprint, a.reason) for a in receiver.snapshot() if a.status == "resolved"]
    assert resolved == [(by_dep["chat"], "removed")]
    assert [r["id"] for r in state(state_file)["recommendations"]] == [by_dep["code"]]
