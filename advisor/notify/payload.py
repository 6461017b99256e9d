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
import math
from typing import Any

from advisor import conventions as c
from advisor.domain import Recommendation, rfc3339

ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero time, which Alertmanager sends as endsAt of a firing alert."""


def finite(obj: Any) -> Any:
    """A JSON-ready copy of ``obj`` with NaN and ±Inf as ``None`` (JSON has no such numbers):
    ``{"a": [1.0, inf]} → {"a": [1.0, None]}``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


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
            "current": json.dumps(finite(rec.current), allow_nan=False, default=str),
            "suggested": json.dumps(finite(rec.suggested), allow_nan=False, default=str),
            "confidence": f"{rec.confidence:.2f}",
            "predicted_effect": json.dumps(finite(rec.predicted_effect), sort_keys=True, allow_nan=False, default=str),
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
