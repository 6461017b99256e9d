"""An alert's label set is fixed for the incident's whole life, however its best turn changed in between (issue 13:
one incident, one opened and one resolved).

The lifecycle re-renders an incident every evaluation; its ``rule``, ``dial`` and ``action`` follow the best turn
(``goodput_below_target``'s replicas at opening, ``kv_saturation``'s fp8 KV at the end, say) and its confidence may
fall. Alertmanager identifies an alert by its labels: an alert with other labels is another alert, and the one that
fired stays firing until its ``endsAt``. So the labels are ``alertname``, ``deployment``, ``problem``, ``severity``
and ``id``, and the current turn is in the annotations. Checked against a real receiver on loopback.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

from advisor.domain import Recommendation
from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from tests.notify.conftest import BASE, Hook

PREVIOUS_RELEASE = Path(__file__).resolve().parent.parent / "fixtures" / "previous_release_notify"


def _incident() -> tuple[Recommendation, Recommendation]:
    opened = replace(
        BASE,
        id="00000000000000a1",
        problem="saturation",
        rule="goodput_below_target",
        dial="replicas",
        action="increase",
        current=1,
        suggested=2,
        severity="critical",
    )
    # the same incident (same id) at its resolution: best turn now kv_saturation's fp8 KV, confidence 0.4
    resolved = replace(
        opened,
        rule="kv_saturation",
        dial="kv_cache_dtype",
        action="set",
        current="auto",
        suggested="fp8",
        confidence=0.4,
        resolved_at=opened.opened_at + 600,
    )
    return opened, resolved


LABELS = {
    "alertname": "CapacityAdvisorRecommendation",
    "deployment": "chat-8b",
    "problem": "saturation",
    "severity": "critical",
    "id": "00000000000000a1",
}


def test_the_resolved_alert_carries_the_labels_it_fired_with(hook: Hook) -> None:
    am = ReceiverConfig.model_validate(
        {"name": "am", "type": "alertmanager", "url": hook.url, "resend_interval": 3600, "timeout_seconds": 2}
    )
    opened, resolved = _incident()
    n = build_notifier([am], None, None)
    try:
        n.submit_cycle([("opened", opened)])
        assert n.flush(10)
        n.submit_cycle([("resolved", resolved)])
        assert n.flush(10)
    finally:
        n.close(2)
    fired, ended = (h.json() for h in hook.acked())
    assert fired[0]["labels"] == LABELS
    assert ended[0]["labels"] == LABELS, "the resolved alert must be the one that fired (same label set)"
    assert ended[0]["endsAt"] == "2026-09-21T14:23:20Z"  # 1,790,000,000 + 600 s
    # the turn is in the annotations: the one suggested at opening, then the one at resolution
    turn = ("rule", "dial", "action", "current", "suggested")
    assert [fired[0]["annotations"][k] for k in turn] == ["goodput_below_target", "replicas", "increase", "1", "2"]
    assert [ended[0]["annotations"][k] for k in turn] == ["kv_saturation", "kv_cache_dtype", "set", '"auto"', '"fp8"']


def test_a_webhook_gets_one_label_set_for_the_incident_and_the_turn_in_the_annotations(hook: Hook) -> None:
    """A webhook receiver keeps no alert state: the labels come from the incident's fixed fields alone."""
    opened, resolved = _incident()
    cfg = ReceiverConfig.model_validate({"name": "ops", "url": hook.url, "timeout_seconds": 2})
    n = build_notifier([cfg], None, None)
    try:
        n.submit_cycle([("opened", opened)])
        assert n.flush(10)
        n.submit_cycle([("resolved", resolved)])
        assert n.flush(10)
    finally:
        n.close(2)
    alerts = [a for h in hook.acked() for a in h.json()["alerts"]]
    assert [(a["status"], a["labels"], a["fingerprint"]) for a in alerts] == [
        ("firing", LABELS, "00000000000000a1"),
        ("resolved", LABELS, "00000000000000a1"),
    ]
    assert [(a["annotations"]["rule"], a["annotations"]["dial"]) for a in alerts] == [
        ("goodput_below_target", "replicas"),
        ("kv_saturation", "kv_cache_dtype"),
    ]


def test_keep_alives_carry_the_current_turn_under_the_labels_the_alert_fired_with(hook: Hook) -> None:
    """An ``updated`` incident sends nothing itself; the next keep-alive carries its current turn (annotations)
    under the labels it fired with — even when the low-confidence guard would now say ``warning``."""
    am = ReceiverConfig.model_validate(
        {"name": "am", "type": "alertmanager", "url": hook.url, "resend_interval": "1s", "timeout_seconds": 2}
    )
    opened, resolved = _incident()
    turned = replace(resolved, resolved_at=None)

    def turned_resent(h: Hook) -> bool:
        return any(a["annotations"]["dial"] == "kv_cache_dtype" for x in h.acked() for a in x.json())

    n = build_notifier([am], None, None)
    try:
        n.submit_cycle([("opened", opened)])
        assert n.flush(10)
        n.submit_cycle([("updated", turned)])
        assert n.stats()["am"].queued == 0, "an update is not a notification"
        assert hook.wait(turned_resent, 20)
    finally:
        n.close(2)
    alerts = [a for h in hook.acked() for a in h.json()]
    assert {json.dumps(a["labels"], sort_keys=True) for a in alerts} == {json.dumps(LABELS, sort_keys=True)}
    last = alerts[-1]
    assert (last["annotations"]["dial"], json.loads(last["annotations"]["suggested"])) == ("kv_cache_dtype", "fp8")
    assert n.stats()["am"].sent == 1  # the opening; the rest were keep-alives


def test_an_alert_the_previous_release_fired_keeps_its_labels_to_the_end(hook: Hook, tmp_path: Path) -> None:
    """The previous release's outbox (``tests/fixtures/previous_release_notify``) holds an active alert fired with
    that release's labels (``rule``, ``dial``, ``action``). After an upgrade its keep-alives and its resolution
    carry those labels, so Alertmanager ends the alert that fired, though the incident is re-rendered with the
    new fields (a problem, another turn)."""
    shutil.copy(PREVIOUS_RELEASE / "am.outbox.json", tmp_path / "am.outbox.json")
    old = json.loads((tmp_path / "am.outbox.json").read_text())
    fired = Recommendation.from_record(old["active"][0]["recommendation"])
    am = ReceiverConfig.model_validate(
        {"name": "am", "type": "alertmanager", "url": hook.url, "resend_interval": "1s", "timeout_seconds": 2}
    )
    t0 = time.monotonic()
    n = build_notifier([am], tmp_path, None, clock=lambda: 1_790_000_600.0 + time.monotonic() - t0)
    legacy = {
        "alertname": "CapacityAdvisorRecommendation",
        "deployment": "chat-8b",
        "rule": "queue_growth",
        "dial": "replicas",
        "action": "increase",
        "severity": "warning",  # critical at confidence 0.4: sent as a warning
    }

    def resent(h: Hook) -> bool:
        return len([x for x in h.acked() if x.key == f"{fired.id}-firing-1790000000000"]) >= 2

    try:
        assert n.flush(10)  # the two pending transitions the previous release left
        now_turn = replace(fired, problem="saturation", rule="kv_saturation", dial="gpu_memory_utilization")
        n.submit_cycle([("updated", now_turn)])
        assert hook.wait(resent, 20)  # the opening left pending, then a keep-alive
        n.submit_cycle([("resolved", replace(now_turn, resolved_at=1_790_000_700.0))])
        assert n.flush(10)
    finally:
        n.close(2)
    mine = [a for x in hook.acked() for a in x.json() if a["annotations"]["idempotency_key"].startswith(fired.id)]
    assert [a["labels"] for a in mine] == [legacy] * len(mine)
    assert mine[-1]["endsAt"] == "2026-09-21T14:25:00Z"  # 1,790,000,700: the resolution
    assert mine[-1]["annotations"]["dial"] == "gpu_memory_utilization"
