"""Webhook sender against a real loopback receiver."""

from __future__ import annotations

import logging

import pytest

from advisor.domain import Recommendation
from advisor.notify.payload import webhook_message
from advisor.notify.webhook import WebhookSender
from tests.conftest import Receiver


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
    assert a["endsAt"] == "0001-01-01T00:00:00Z"
    assert a["labels"]["alertname"] == "CapacityAdvisorRecommendation"
    assert set(a["annotations"]) >= {"summary", "description", "runbook_url"}
    resolved = webhook_message(_rec(resolved_at=1_790_000_060.0), "ops")
    assert resolved["status"] == "resolved"
    assert resolved["alerts"][0]["endsAt"] == "2026-09-21T14:14:20Z"
    assert resolved["alerts"][0]["fingerprint"] == "abc123"


def test_5xx_is_retried_until_delivered(webhook_receiver: Receiver) -> None:
    webhook_receiver.script = [503, 502]
    s = WebhookSender("ops", webhook_receiver.url, max_attempts=5, backoff_seconds=0.01)
    outcome = s.deliver(webhook_message(_rec(), "ops"))
    s.close()
    assert outcome.outcome == "sent"
    assert outcome.attempts == 3
    assert webhook_receiver.codes == [503, 502, 200]
    assert len(webhook_receiver.bodies) == 1


def test_4xx_is_not_retried_and_its_body_is_in_the_error(webhook_receiver: Receiver) -> None:
    webhook_receiver.script = [400]
    s = WebhookSender("ops", webhook_receiver.url, max_attempts=5, backoff_seconds=0.01)
    outcome = s.deliver(webhook_message(_rec(), "ops"))
    s.close()
    assert outcome.outcome == "failed"
    assert outcome.attempts == 1
    assert webhook_receiver.codes == [400]
    assert outcome.error is not None and "unavailable" in outcome.error


def test_the_url_never_appears_in_logs(webhook_receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    secret_url = webhook_receiver.url + "/T0SECRET?token=hunter2"
    webhook_receiver.script = [500, 500]
    caplog.set_level(logging.DEBUG)
    s = WebhookSender("ops", secret_url, max_attempts=2, backoff_seconds=0.01)
    outcome = s.deliver(webhook_message(_rec(), "ops"))
    s.close()
    assert outcome.outcome == "failed"
    assert "T0SECRET" not in caplog.text and "hunter2" not in caplog.text
    assert "<redacted>" in caplog.text


def test_an_unreachable_receiver_fails_after_its_attempts() -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    s = WebhookSender("ops", f"http://127.0.0.1:{port}/hook", max_attempts=3, backoff_seconds=0.01)
    outcome = s.deliver(webhook_message(_rec(), "ops"))
    s.close()
    assert (outcome.outcome, outcome.attempts, outcome.status_code) == ("failed", 3, None)
