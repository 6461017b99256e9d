"""Every receiver's request body is strict JSON: a NaN or ±Inf in a recommendation's numbers is written
``null``, never the bare ``NaN``/``Infinity`` Python's ``json`` writes by default (which JSON parsers reject)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from advisor.notify.receivers import (
    AlertmanagerReceiver,
    Notification,
    SlackReceiver,
    WebhookReceiver,
    idempotency_key,
)
from tests.notify.conftest import BASE

REC = replace(
    BASE,
    predicted_effect={"kv_cache_tokens": {"before": math.inf, "after": math.nan}},
    evidence={"kv_cache_usage_ratio": math.nan, "requests_waiting": -math.inf},
)


def _strict(body: bytes) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(body, parse_constant=refuse)


def test_receiver_bodies_write_null_for_nan_and_infinity() -> None:
    note = Notification(idempotency_key("opened", REC), "opened", REC, REC.deployment, 0.0)
    receivers = [
        WebhookReceiver("w", "http://hook.invalid/"),
        SlackReceiver("s", "http://hook.invalid/"),
        AlertmanagerReceiver("am", "http://am.invalid:9093/", resend_interval=60.0),
    ]
    for r in receivers:
        _strict(r.build_request(note, REC.opened_at + 1).body)
    _strict(receivers[2].build_resend([REC], REC.opened_at + 1).body)
    body = _strict(receivers[0].build_request(note, REC.opened_at + 1).body)
    text = json.dumps(body)
    assert "NaN" not in text and "Infinity" not in text
