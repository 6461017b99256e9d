"""An Alertmanager alert keeps its identity (its label set) from firing to resolved, however the incident's best
turn changed in between (issue 13: one incident, one opened and one resolved).

The lifecycle re-renders an incident every evaluation; its ``rule``, ``dial`` and ``action`` follow the best turn
(``goodput_below_target``'s replicas at opening, ``kv_saturation``'s fp8 KV at the end, say) and its confidence may
fall. Alertmanager identifies an alert by its labels: a resolved alert with other labels is another alert, and the
one that fired stays firing until its ``endsAt``. Checked against a real receiver on loopback.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from tests.notify.conftest import BASE, Hook


def test_the_resolved_alert_carries_the_labels_it_fired_with(hook: Hook) -> None:
    am = ReceiverConfig.model_validate(
        {"name": "am", "type": "alertmanager", "url": hook.url, "resend_interval": 3600, "timeout_seconds": 2}
    )
    opened = replace(
        BASE,
        id="00000000000000a1",
        rule="goodput_below_target",
        dial="replicas",
        action="increase",
        severity="critical",
    )
    # the same incident (same id) at its resolution: best turn now kv_saturation's fp8 KV, confidence 0.4
    resolved = replace(
        opened,
        rule="kv_saturation",
        dial="kv_cache_dtype",
        action="set",
        confidence=0.4,
        resolved_at=opened.opened_at + 600,
    )
    n = build_notifier([am], None, None)
    try:
        n.submit_cycle([("opened", opened)])
        assert n.flush(10)
        n.submit_cycle([("resolved", resolved)])
        assert n.flush(10)
    finally:
        n.close(2)
    fired, ended = (h.json() for h in hook.acked())
    labels = {
        "alertname": fired[0]["labels"]["alertname"],
        "deployment": "chat-8b",
        "rule": "goodput_below_target",
        "dial": "replicas",
        "action": "increase",
        "severity": "critical",
    }
    assert fired[0]["labels"] == labels
    assert ended[0]["labels"] == labels, "the resolved alert must be the one that fired (same label set)"
    assert ended[0]["endsAt"] == "2026-09-21T14:23:20Z"  # 1,790,000,000 + 600 s
