"""Issue 14, crash window: a SIGKILL between the outbox write and the state-file write leaves no alert firing
forever and sends no resolved twice under different idempotency keys (Alertmanager's contract: an alert is
identified by its fingerprint; one resolution ends it).

The daemon (``capacity-advisor run``) runs with the test-only fault point
``CAPACITY_ADVISOR_FAULT_POINT=between_outbox_and_state``: in its first cycle with transitions it kills itself
after the outbox accepted them and before the state file is written again. Each of 20 runs asserts the window was
hit (the process died of SIGKILL, the outbox holds the transition's key, the state file still lists it as being
notified), then the next run restarts the daemon on the same state file and outbox. A recording webhook receiver
on loopback sees every alert; an idempotent receiver keeps the first of each key, as
``X-Advisor-Idempotency-Key`` lets it. Six more runs kill it at the other side of the pair
(``between_state_and_outbox``: the state file recorded the transition, no outbox holds it yet), where the restart
must send what the outbox never accepted, under the same id and key.
"""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.crash_support import (
    Daemon,
    Delivered,
    FlipTarget,
    RecordingReceiver,
    deployment,
    outbox_keys,
    state,
    write_config,
)

OUTBOX_THEN_STATE = "between_outbox_and_state"
STATE_THEN_OUTBOX = "between_state_and_outbox"
RUNS = 20


def _key(kind: str, rec: dict[str, Any]) -> str:
    """The idempotency key of a transition as the state file records it (receivers.idempotency_key's form)."""
    resolved = kind == "resolved"
    ts = rec["resolved_at"] if resolved else rec["opened_at"]
    return f"{rec['id']}-{'resolved' if resolved else 'firing'}-{round(ts * 1000)}"


def _die_in_window(
    cfg: Path, outbox: Path, state_file: Path, before: Any = None, point: str = OUTBOX_THEN_STATE
) -> list[tuple[str, str]]:
    """One life: start armed at ``point``, let ``before`` flip the page, wait for the kill; assert the window was
    hit and return the transitions ``(kind, id)`` it was notifying."""
    d = Daemon(cfg, {"CAPACITY_ADVISOR_FAULT_POINT": point})
    try:
        d.wait_ready()
        if before is not None:
            before()
        rc = d.wait(30)
    finally:
        d.kill()
    assert rc == -signal.SIGKILL, f"the daemon was not killed at the fault point (rc {rc}):\n{d.log()[-3000:]}"
    notifying = state(state_file).get("notifying", [])
    assert notifying, "the state file was written after the outbox: the window was not hit"
    held = outbox_keys(outbox) if outbox.exists() else set()
    for n in notifying:
        in_outbox = _key(n["kind"], n["recommendation"]) in held
        assert in_outbox == (point == OUTBOX_THEN_STATE), f"the outbox {'lacks' if in_outbox else 'holds'} it"
    return [(n["kind"], n["recommendation"]["id"]) for n in notifying]


def _check_receiver(alerts: list[Delivered]) -> dict[str, dict[str, set[str]]]:
    """Per fingerprint, per status, the distinct keys; asserts stable keys and one resolution per firing."""
    keys: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    order: dict[str, list[str]] = defaultdict(list)
    for a in alerts:
        keys[a.fingerprint][a.status].add(a.key)
        order[a.fingerprint].append(a.status)
    for f, by_status in keys.items():
        assert len(by_status["firing"]) == 1, f"{f} fired under several keys: {by_status['firing']}"
        assert len(by_status["resolved"]) <= 1, f"{f} resolved twice under different keys: {by_status['resolved']}"
        statuses = order[f]
        if "resolved" in statuses:  # nothing fires again under an id once it resolved
            assert "firing" not in statuses[statuses.index("resolved") :], f"{f} fired after it resolved"
    return keys


@pytest.mark.integration
@pytest.mark.parametrize(("point", "runs"), [(OUTBOX_THEN_STATE, RUNS), (STATE_THEN_OUTBOX, 6)])
def test_a_sigkill_between_the_outbox_and_the_state_file_leaves_nothing_firing_and_nothing_resolved_twice(
    tmp_path: Path, point: str, runs: int
) -> None:
    rec = RecordingReceiver().start()
    target = FlipTarget()
    outbox = tmp_path / "outbox"
    state_file = tmp_path / "state.json"
    cfg = write_config(tmp_path / "advisor.yaml", [deployment("chat", target.url())], rec.url, outbox)
    try:
        hit: list[tuple[str, str]] = []
        for i in range(runs):
            is_open = bool(state(state_file).get("recommendations"))
            if i % 2 == 0:  # the page changed while the daemon was down
                target.set(not is_open)
                hit += _die_in_window(cfg, outbox, state_file, point=point)
            elif is_open and i % 4 == 1:  # the condition still holds: the alert stays open, same id
                opened = {i for k, i in hit if k == "opened"}

                def hold_then_clear(opened: set[str] = opened) -> None:
                    time.sleep(1.0)  # several 0.2 s cycles on the restored incident: no new alert
                    assert {a.fingerprint for a in rec.snapshot() if a.status == "firing"} <= opened
                    target.set(False)

                hit += _die_in_window(cfg, outbox, state_file, hold_then_clear, point)
            else:
                hit += _die_in_window(cfg, outbox, state_file, lambda o=is_open: target.set(not o), point)
        assert len(hit) >= runs
        assert {k for k, _ in hit} == {"opened", "resolved"}
        # a last life, unarmed, on a healthy page: everything that fired resolves
        target.set(False)
        d = Daemon(cfg)
        try:
            d.wait_ready()
            fired = {i for k, i in hit if k == "opened"}

            def all_resolved(alerts: list[Delivered]) -> bool:
                return fired <= {a.fingerprint for a in alerts if a.status == "resolved"}

            assert rec.wait_for(all_resolved, 30), d.log()[-3000:]
            time.sleep(0.6)  # a few more cycles: nothing else may arrive
            d.signal(signal.SIGTERM)
            assert d.wait(30) == 0
        finally:
            d.kill()
        keys = _check_receiver(rec.snapshot())
        assert set(keys) == fired  # every alert that fired is one the daemon opened in a run
        for f in fired:
            assert len(keys[f]["resolved"]) == 1, f"{f} was never resolved"
        assert not state(state_file).get("recommendations")
        assert not state(state_file).get("notifying")
    finally:
        rec.stop()
        target.close()


@pytest.mark.integration
def test_start_up_reconciles_an_outbox_the_state_file_disagrees_with(tmp_path: Path) -> None:
    """What a release that notified before it persisted left behind: an outbox firing the state file never
    recorded gets its resolved (same id); a resolution the outbox holds for an id the state file still has open
    is not followed by a second one — the next alert is a new one."""
    rec = RecordingReceiver().start()
    target = FlipTarget()
    outbox = tmp_path / "outbox"
    state_file = tmp_path / "state.json"
    cfg = write_config(tmp_path / "advisor.yaml", [deployment("chat", target.url())], rec.url, outbox)
    try:
        # 1. fired; the state file forgets it (as if written before the transition), the page turns healthy
        target.set(True)
        ((_, x),) = _die_in_window(cfg, outbox, state_file)
        doc = state(state_file)
        state_file.write_text(json.dumps({**doc, "recommendations": [], "notifying": []}))
        target.set(False)
        d = Daemon(cfg)
        try:
            d.wait_ready()
            resolved = rec.wait_for(lambda a: any(r.fingerprint == x and r.status == "resolved" for r in a), 20)
            assert resolved, f"no resolved for {x} in 20 s: {rec.snapshot()}\n{d.log()[-4000:]}"
            # 2. fire again, and resolve in the window; the state file still has it open (the old order)
            target.set(True)
            fired = rec.wait_for(lambda a: any(r.fingerprint != x and r.status == "firing" for r in a), 20)
            assert fired, f"no new firing in 20 s: {rec.snapshot()}\n{d.log()[-4000:]}"
        finally:
            d.signal(signal.SIGTERM)
            d.wait(30)
        opened = state(state_file)["recommendations"]
        ((_, y),) = _die_in_window(cfg, outbox, state_file, lambda: target.set(False))
        doc = state(state_file)
        state_file.write_text(json.dumps({**doc, "recommendations": opened, "notifying": []}))
        target.set(True)  # the condition holds again at the restart
        d = Daemon(cfg)
        try:
            d.wait_ready()
            assert rec.wait_for(lambda a: any(r.fingerprint not in (x, y) and r.status == "firing" for r in a), 20)
            time.sleep(0.6)
        finally:
            d.signal(signal.SIGTERM)
            d.wait(30)
        keys = _check_receiver(rec.snapshot())
        assert len(keys[x]["resolved"]) == 1
        assert len(keys[y]["resolved"]) == 1
    finally:
        rec.stop()
        target.close()
