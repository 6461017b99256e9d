"""What each receiver sends (Slack blocks, Alertmanager postable alerts, webhook body and headers) and the
receiver configuration's rules."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic
import pytest

from advisor.domain import rfc3339
from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier, delivery_policy
from advisor.notify.receivers import (
    IDEMPOTENCY_HEADER,
    AlertmanagerReceiver,
    Notification,
    WebhookReceiver,
    idempotency_key,
    slack_message,
)
from tests.notify.conftest import BASE, Hook, rec


def _texts(msg: dict[str, Any]) -> str:
    """Every piece of text a Slack reader sees, joined."""
    out = [msg["text"]]
    for b in msg["blocks"]:
        if "text" in b:
            out.append(b["text"]["text"])
        out += [f["text"] for f in b.get("fields", [])]
        out += [e["text"] for e in b.get("elements", [])]
    return "\n".join(out)


def test_the_slack_message_says_what_why_the_numbers_and_the_flag() -> None:
    msg = slack_message(BASE)
    text = _texts(msg)
    assert msg["text"].startswith("[FIRING] chat-8b: KV cache pool saturated")  # the fallback
    assert "--max-num-seqs 192" in msg["text"]
    assert msg["blocks"][0]["type"] == "header" and len(msg["blocks"][0]["text"]["text"]) <= 150
    assert BASE.summary in text  # what
    assert "12 requests waiting" in text  # why
    assert "`256` → `192`" in text  # the numbers: current → suggested
    assert "preemptions_per_second: 0.4 → 0" in text  # predicted effect
    assert "kv_cache_usage_ratio: 0.97" in text  # evidence
    assert "Confidence*\n0.80" in text
    assert "```--max-num-seqs 192```" in text  # the flag, as code
    assert "<https://example.invalid/runbook#kv-saturation|runbook>" in text
    resolved = slack_message(replace(BASE, resolved_at=BASE.opened_at + 600))
    assert resolved["text"].startswith("[RESOLVED]") and ":white_check_mark:" in _texts(resolved)
    assert f"resolved {rfc3339(BASE.opened_at + 600)}" in _texts(resolved)


def test_slack_text_is_escaped_and_cut_to_the_block_limits() -> None:
    msg = slack_message(replace(BASE, summary="a <b> & c" * 40, description="x" * 5000))
    assert "a &lt;b&gt; &amp; c" in msg["blocks"][1]["text"]["text"]
    assert len(msg["blocks"][0]["text"]["text"]) <= 150
    assert all(len(b["text"]["text"]) <= 3000 for b in msg["blocks"] if "text" in b)


def test_a_slack_receiver_posts_blocks_to_the_hook(hook: Hook) -> None:
    n = build_notifier([ReceiverConfig(name="chat", type="slack", url=hook.url)], None, None)
    n.submit("opened", BASE)
    assert n.flush(5)
    n.close(1)
    body = hook.acked()[0].json()
    assert set(body) == {"text", "blocks"} and "--max-num-seqs 192" in _texts(body)


def _note(kind: str, r: Any = BASE) -> Notification:
    return Notification(idempotency_key(kind, r), kind, r, r.deployment, 0.0)


def test_alertmanager_firing_alerts_end_four_resend_intervals_ahead() -> None:
    am = AlertmanagerReceiver("am", "http://am:9093/", resend_interval=60.0)
    now = BASE.opened_at + 5
    req = am.build_request(_note("opened"), now)
    assert req.url == "http://am:9093/api/v2/alerts"
    (alert,) = json.loads(req.body)
    assert set(alert) == {"labels", "annotations", "startsAt", "endsAt"}  # no generatorURL without external_url
    assert alert["startsAt"] == rfc3339(BASE.opened_at)
    assert alert["endsAt"] == rfc3339(now + 240)
    assert alert["labels"]["alertname"] == "CapacityAdvisorRecommendation"
    assert all(isinstance(v, str) for v in alert["annotations"].values())
    assert req.headers[IDEMPOTENCY_HEADER] == idempotency_key("opened", BASE)

    done = replace(BASE, resolved_at=BASE.opened_at + 300)
    (resolved,) = json.loads(am.build_request(_note("resolved", done), now + 999).body)
    assert resolved["endsAt"] == rfc3339(BASE.opened_at + 300)

    again = am.build_resend([BASE, rec(2)], now + 60)
    assert [a["endsAt"] for a in json.loads(again.body)] == [rfc3339(now + 300)] * 2
    # a keep-alive re-send keeps each alert's firing idempotency key (issue 13: re-sends keep id and key)
    firing_keys = [f"{r.id}-firing-{round(r.opened_at * 1000)}" for r in (BASE, rec(2))]
    assert [a["annotations"]["idempotency_key"] for a in json.loads(again.body)] == firing_keys
    assert again.headers[IDEMPOTENCY_HEADER].startswith("batch-")


def test_the_webhook_body_is_the_same_bytes_on_every_attempt() -> None:
    w = WebhookReceiver("ops", "http://h/hook", hmac_secret=b"k")
    a, b = w.build_request(_note("opened"), 1.0), w.build_request(_note("opened"), 99.0)
    assert a.body == b.body and a.headers == b.headers


def test_a_webhook_firing_alert_ends_four_resend_intervals_after_its_cycle_and_a_resolved_one_at_its_end() -> None:
    """Issue 14: endsAt as Prometheus sets it for Alertmanager (ValidUntil = evaluation + 4 × resend delay), not
    the zero time; counted from the cycle that accepted it, so a retry an hour later sends the same bytes."""
    w = WebhookReceiver("ops", "http://h/hook", ends_interval=30.0)
    accepted = BASE.opened_at + 7
    note = Notification(idempotency_key("opened", BASE), "opened", BASE, BASE.deployment, accepted)
    (a,) = json.loads(w.build_request(note, accepted + 3600).body)["alerts"]
    assert a["status"] == "firing" and a["endsAt"] == rfc3339(BASE.opened_at + 7 + 120)
    done = replace(BASE, resolved_at=BASE.opened_at + 50)
    note = Notification(idempotency_key("resolved", done), "resolved", done, BASE.deployment, accepted + 60)
    (a,) = json.loads(w.build_request(note, accepted + 60).body)["alerts"]
    assert a["status"] == "resolved" and a["endsAt"] == rfc3339(BASE.opened_at + 50)


def test_a_webhook_receiver_takes_its_resend_interval_for_ends_at(hook: Hook) -> None:
    cfg = ReceiverConfig.model_validate({"name": "ops", "url": hook.url, "resend_interval": "2m"})
    n = build_notifier([cfg], None, None, clock=lambda: BASE.opened_at + 1)
    try:
        n.submit("opened", BASE)
        assert n.flush(5)
    finally:
        n.close(1)
    (a,) = hook.acked()[0].json()["alerts"]
    assert a["endsAt"] == rfc3339(BASE.opened_at + 1 + 480)


def test_idempotency_keys_are_stable_and_distinct_per_transition() -> None:
    done = replace(BASE, resolved_at=BASE.opened_at + 60)
    assert idempotency_key("opened", BASE) == f"{BASE.id}-firing-1790000000000"
    assert idempotency_key("resolved", done) == f"{BASE.id}-resolved-1790000060000"
    assert idempotency_key("opened", BASE) == idempotency_key("opened", replace(BASE, confidence=0.1))


def test_the_fields_of_the_old_receiver_still_validate() -> None:
    old = {"name": "ops", "type": "webhook", "url": "http://127.0.0.1:9099/hook", "send_resolved": False}
    cfg = ReceiverConfig.model_validate({**old, "timeout_seconds": "5s", "max_attempts": 5, "backoff_seconds": "0.1s"})
    assert (cfg.timeout_seconds, cfg.max_attempts, cfg.backoff_seconds, cfg.send_resolved) == (5.0, 5, 0.1, False)
    policy = delivery_policy(cfg)
    assert (policy.retention_seconds, policy.max_backoff_seconds, policy.rate_limit_per_minute) == (86400, 60, None)
    assert ReceiverConfig(name="am", type="alertmanager", url="http://am:9093").resend_interval == 60.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "set exactly one of url, url_file, url_env (got none)"),
        ({"url": "http://h/x", "url_env": "X"}, "got url, url_env"),
        ({"url": "http://h/x", "type": "slack", "hmac_secret": "k"}, "hmac_secret applies to type webhook only"),
        ({"url": "http://h/x", "hmac_secret": "k", "hmac_secret_env": "K"}, "at most one of hmac_secret"),
        ({"url": "http://h/x", "backoff_seconds": "2m"}, "must not exceed max_backoff_seconds"),
        ({"url": "http://h/x", "rate_limit_per_minute": 0}, "greater than 0"),
        ({"url": "http://h/x", "retention": "forever"}, "invalid duration"),
        ({"url": "http://h/x", "type": "email"}, "'webhook', 'slack' or 'alertmanager'"),
        ({"url_file": "/nonexistent/advisor-url"}, "url_file: cannot read '/nonexistent/advisor-url'"),
        ({"url_env": "ADVISOR_TEST_SURELY_UNSET"}, "ADVISOR_TEST_SURELY_UNSET' is not set"),
    ],
)
def test_invalid_receivers_say_why(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError) as err:
        ReceiverConfig.model_validate({"name": "ops", **fields})
    assert message in str(err.value)


def test_relative_secret_files_are_read_from_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "url").write_text("http://127.0.0.1:1/hook\n")
    cfg = ReceiverConfig.model_validate({"name": "ops", "url_file": "url"}, context={"base_dir": tmp_path})
    assert cfg.resolved_url(tmp_path) == "http://127.0.0.1:1/hook"
