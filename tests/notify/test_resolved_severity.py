"""A resolved alert carries the severity its firing alert had (issue 13, "notifications operators can route").

Seen with ``capacity-advisor run`` against the demo's engines and a webhook receiver: incident
``d6ffd923ab616430`` fired with ``severity="critical"`` (confidence 0.75 at opening) and resolved with
``severity="warning"``, because the low-confidence guard was applied again to the confidence at resolution (0.45).
Alertmanager identifies an alert by its label set, so that resolution matched no firing alert: the critical one
stayed active until its ``resolve_timeout``, and a route on ``severity`` sent the two halves to different places.
The guard stays for firing alerts: a critical incident is never *sent firing* below confidence 0.5.
"""

from __future__ import annotations

import time
from dataclasses import replace

from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from advisor.notify.payload import Links
from tests.notify.conftest import Hook, rec

LINKS = Links("http://advisor.example.internal:9188/", "")


def test_the_resolved_alert_keeps_the_firing_severity_whatever_the_confidence_at_resolution(hook: Hook) -> None:
    opened = rec(1, severity="critical", confidence=0.75)
    resolved = replace(opened, confidence=0.45, resolved_at=opened.opened_at + 60)
    cfg = ReceiverConfig.model_validate({"name": "ops", "url": hook.url, "backoff_seconds": 0.05})
    n = build_notifier([cfg], None, None)
    try:
        n.submit_cycle([("opened", opened)], LINKS)
        assert n.flush(10)
        n.submit_cycle([("resolved", resolved)], LINKS)
        assert n.flush(10)
    finally:
        n.close(2)
    alerts = [a for h in hook.acked() for a in h.json()["alerts"]]
    assert [(a["status"], a["labels"]["severity"]) for a in alerts] == [
        ("firing", "critical"),
        ("resolved", "critical"),
    ]
    assert alerts[0]["labels"] == alerts[1]["labels"]


def test_a_critical_incident_is_still_never_sent_firing_at_low_confidence(hook: Hook) -> None:
    unsure = rec(2, severity="critical", confidence=0.35, opened_at=time.time())
    cfg = ReceiverConfig.model_validate({"name": "ops", "url": hook.url, "backoff_seconds": 0.05})
    n = build_notifier([cfg], None, None)
    try:
        n.submit_cycle([("opened", unsure)], LINKS)
        assert n.flush(10)
    finally:
        n.close(2)
    ((alert,),) = [h.json()["alerts"] for h in hook.acked()]
    assert (alert["status"], alert["labels"]["severity"]) == ("firing", "warning")
