"""The webhook body, shaped as Alertmanager's webhook notifier sends it (version "4").

Shape (``notify/webhook/webhook.go`` ``Message`` in prometheus/alertmanager)::

    {"version": "4", "groupKey": "...", "truncatedAlerts": 0, "status": "firing"|"resolved",
     "receiver": "ops", "groupLabels": {...}, "commonLabels": {...}, "commonAnnotations": {...},
     "externalURL": "...",
     "alerts": [{"status": ..., "labels": {...}, "annotations": {"summary", "description", ...},
                 "startsAt": RFC3339, "endsAt": RFC3339 or "0001-01-01T00:00:00Z",
                 "generatorURL": "...", "fingerprint": "<recommendation id>"}]}

Pure: times come from the recommendation.
"""

from __future__ import annotations

import json
from typing import Any

from advisor import conventions as c
from advisor.domain import Recommendation, rfc3339

ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero time, which Alertmanager sends as endsAt of a firing alert."""


def alert_labels(rec: Recommendation) -> dict[str, str]:
    """The alert's identifying labels."""
    return {
        "alertname": c.ALERT_RECOMMENDATION,
        c.LABEL_DEPLOYMENT: rec.deployment,
        c.LABEL_RULE: rec.rule,
        c.LABEL_DIAL: rec.dial,
        c.LABEL_ACTION: rec.action,
        c.LABEL_SEVERITY: rec.severity,
    }


def alert(rec: Recommendation, external_url: str = "") -> dict[str, Any]:
    """One alert of the ``alerts`` array for a recommendation (firing while open, resolved after)."""
    resolved = rec.resolved_at is not None
    return {
        "status": "resolved" if resolved else "firing",
        "labels": alert_labels(rec),
        "annotations": {
            "summary": rec.summary,
            "description": rec.description,
            "runbook_url": rec.runbook,
            "flag": rec.flag,
            "current": json.dumps(rec.current),
            "suggested": json.dumps(rec.suggested),
            "confidence": f"{rec.confidence:.2f}",
            "predicted_effect": json.dumps(rec.predicted_effect, sort_keys=True),
        },
        "startsAt": rfc3339(rec.opened_at),
        "endsAt": rfc3339(rec.resolved_at) if rec.resolved_at is not None else ZERO_TIME,
        "generatorURL": f"{external_url.rstrip('/')}/api/v1/recommendations/{rec.id}" if external_url else "",
        "fingerprint": rec.id,
    }


def webhook_message(rec: Recommendation, receiver: str, external_url: str = "") -> dict[str, Any]:
    """The whole webhook body for one recommendation's transition."""
    a = alert(rec, external_url)
    group_labels = {c.LABEL_DEPLOYMENT: rec.deployment}
    return {
        "version": "4",
        "groupKey": json.dumps(group_labels, sort_keys=True),
        "truncatedAlerts": 0,
        "status": a["status"],
        "receiver": receiver,
        "groupLabels": group_labels,
        "commonLabels": a["labels"],
        "commonAnnotations": a["annotations"],
        "externalURL": external_url,
        "alerts": [a],
    }
