"""The Alertmanager-v4 webhook body (delivery is tested in tests/notify)."""

from __future__ import annotations

from advisor.domain import Recommendation
from advisor.notify.payload import webhook_message


def _rec(resolved_at: float | None = None) -> Recommendation:
    return Recommendation(
        id="abc123",
        deployment="chat-8b",
        rule="kv_saturation",
        dial="kv_cache_dtype",
        action="set",
        current="auto",
        suggested="fp8",
        flag="--kv-cache-dtype fp8",
        severity="warning",
        confidence=0.8,
        summary="s",
        description="d",
        runbook="r",
        opened_at=1_790_000_000.0,
        predicted_effect={"kv_cache_tokens": {"before": 1, "after": 2}},
        evidence={"window_seconds": 60},
        resolved_at=resolved_at,
    )


def test_payload_has_the_alertmanager_v4_shape() -> None:
    firing = webhook_message(_rec(), "ops")
    assert firing["version"] == "4"
    assert firing["status"] == "firing"
    a = firing["alerts"][0]
    assert a["fingerprint"] == "abc123"
    assert a["startsAt"] == "2026-09-21T14:13:20Z"  # 1_790_000_000 in UTC
    assert a["endsAt"] == "0001-01-01T00:00:00Z"  # no time to vouch until given: Alertmanager's zero time
    # issue 14: given one (evaluation + 4 × resend interval), a firing alert carries it
    vouched = webhook_message(_rec(), "ops", ends_at=1_790_000_240.0)
    assert vouched["alerts"][0]["endsAt"] == "2026-09-21T14:17:20Z"
    assert a["labels"]["alertname"] == "CapacityAdvisorRecommendation"
    # labels fixed for the incident's life; its current turn is annotated (issue 13)
    assert set(a["labels"]) == {"alertname", "deployment", "problem", "severity", "id"}
    assert a["labels"]["id"] == "abc123"
    assert set(a["annotations"]) >= {"summary", "description", "runbook_url", "rule", "dial", "action", "flag"}
    resolved = webhook_message(_rec(resolved_at=1_790_000_060.0), "ops", ends_at=1_790_000_240.0)
    assert resolved["status"] == "resolved"
    assert resolved["alerts"][0]["endsAt"] == "2026-09-21T14:14:20Z"
    assert resolved["alerts"][0]["fingerprint"] == "abc123"
