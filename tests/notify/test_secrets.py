"""Acceptance 3 of issue 6: HMAC signatures verify with the shared secret; a receiver URL holding a token never
appears in logs (every logger at DEBUG, urllib3's included), in reprs or in raised errors."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
from pathlib import Path

import pydantic
import pytest

from advisor.errors import ConfigError
from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from advisor.notify.payload import webhook_message
from advisor.notify.receivers import SIGNATURE_HEADER, Notification, idempotency_key
from tests.notify.conftest import Hook, rec

SHARED_SECRET = "s3cr3t-shared-between-advisor-and-receiver"
FAST = {"backoff_seconds": 0.02, "max_backoff_seconds": 0.05}


@pytest.mark.parametrize("source", ["inline", "file", "env"])
def test_hmac_signatures_verify_with_the_shared_secret(
    hook: Hook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    where: dict[str, str] = {}
    if source == "inline":
        where["hmac_secret"] = SHARED_SECRET
    elif source == "file":
        (tmp_path / "hmac.key").write_text(SHARED_SECRET + "\n")
        where["hmac_secret_file"] = "hmac.key"  # relative to the config's folder
    else:
        monkeypatch.setenv("ADVISOR_TEST_HMAC", SHARED_SECRET)
        where["hmac_secret_env"] = "ADVISOR_TEST_HMAC"
    cfg = ReceiverConfig.model_validate({"name": "ops", "url": hook.url, **where}, context={"base_dir": tmp_path})
    accepted = 1_790_000_100.0
    n = build_notifier([cfg], None, None, base_dir=tmp_path, clock=lambda: accepted)
    n.submit("opened", rec(1))
    assert n.flush(5)
    n.close(1)
    (hit,) = hook.acked()
    expected = "sha256=" + hmac.new(SHARED_SECRET.encode(), hit.raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(hit.headers[SIGNATURE_HEADER], expected)
    wrong = "sha256=" + hmac.new(b"another key", hit.raw, hashlib.sha256).hexdigest()
    assert not hmac.compare_digest(hit.headers[SIGNATURE_HEADER], wrong)
    # endsAt: accepted + 4 × resend_interval (default 60 s), as Prometheus sets it (issue 14)
    expected_body = webhook_message(rec(1), "ops", keys=[idempotency_key("opened", rec(1))], ends_at=accepted + 240)
    assert hit.json() == json.loads(json.dumps(expected_body))


def test_without_a_secret_there_is_no_signature(hook: Hook) -> None:
    n = build_notifier([ReceiverConfig(name="ops", url=hook.url)], None, None)
    n.submit("opened", rec(1))
    assert n.flush(5)
    n.close(1)
    assert SIGNATURE_HEADER not in hook.acked()[0].headers


TOKENS = ("T0SECRETTOKEN", "B0BOTTOKEN", "xoxbhunter2", "hunter2query", "bearer-9f8e7d")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_url_with_a_token_never_appears_in_logs_reprs_or_errors(
    hook: Hook, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)  # root at DEBUG: urllib3's connection-pool lines are captured too
    secret_path = "/T0SECRETTOKEN/B0BOTTOKEN/xoxbhunter2"
    secret_url = hook.url.removesuffix("/hook") + secret_path + "?token=hunter2query"
    # a receiver that echoes the request line in its error body (proxies do)
    hook.script = [503, 502, 400]
    hook.error_body = f"rejected POST {secret_path}?token=hunter2query from you".encode()
    (tmp_path / "slack.url").write_text(secret_url)
    monkeypatch.setenv("ADVISOR_TEST_URL", secret_url)
    dead = f"http://127.0.0.1:{_closed_port()}{secret_path}?token=hunter2query"
    cfgs = [
        ReceiverConfig.model_validate({"name": "ops", "url": secret_url, "bearer_token": "bearer-9f8e7d", **FAST}),
        ReceiverConfig.model_validate({"name": "chat", "type": "slack", "url_file": str(tmp_path / "slack.url")}),
        ReceiverConfig.model_validate({"name": "env", "url_env": "ADVISOR_TEST_URL", **FAST}),
        ReceiverConfig.model_validate({"name": "dead", "url": dead, "max_attempts": 2, **FAST}),
    ]
    n = build_notifier(cfgs, tmp_path / "outbox", None)
    for i in range(2):
        n.submit("opened", rec(i))
    assert n.flush(10)
    n.close(2)
    stats = n.stats()
    live = [stats[name] for name in ("ops", "chat", "env")]  # three receivers share the hook and its script
    assert sum(s.failed for s in live) == 1 and sum(s.sent for s in live) == 5
    (rejected,) = (s for s in live if s.failed)
    assert rejected.last_error is not None and "rejected POST <redacted> from you" in rejected.last_error
    assert stats["dead"].failed == 2
    assert stats["dead"].last_error is not None and "connection refused" in stats["dead"].last_error.lower()
    assert any(h.headers.get("Authorization") == "Bearer bearer-9f8e7d" for h in hook.hits)

    shown = [
        caplog.text,
        repr(n),
        *(repr(c) for c in cfgs),
        *(str(c) for c in cfgs),
        *(repr(w) for w in n.workers),
        *(repr(w.receiver) for w in n.workers),
        *(repr(s) for s in stats.values()),
        *(repr(w.receiver.build_request(_note(), 0.0)) for w in n.workers),
    ]
    for text in shown:
        for token in TOKENS:
            assert token not in text
    assert "<redacted>" in caplog.text
    assert "urllib3.connectionpool" in caplog.text or "POST <redacted>" in caplog.text

    # outbox files hold notifications, never the receiver's URL or headers
    for f in (tmp_path / "outbox").iterdir():
        for token in TOKENS:
            assert token not in f.read_text()


def _note() -> Notification:
    return Notification("k", "opened", rec(1), "chat-8b", 0.0)


def test_config_errors_never_echo_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = "htp://user:hunter2query@host/T0SECRETTOKEN"
    with pytest.raises(pydantic.ValidationError) as err:
        ReceiverConfig.model_validate({"name": "ops", "url": bad})
    assert "hunter2query" not in str(err.value) and "T0SECRETTOKEN" not in str(err.value)
    assert "not shown" in str(err.value)

    (tmp_path / "u").write_text(bad)
    with pytest.raises(pydantic.ValidationError) as err:
        ReceiverConfig.model_validate({"name": "ops", "url_file": str(tmp_path / "u")})
    assert "T0SECRETTOKEN" not in str(err.value) and "url_file must be an http(s) URL" in str(err.value)

    monkeypatch.setenv("ADVISOR_TEST_URL", bad)
    with pytest.raises(pydantic.ValidationError) as err:
        ReceiverConfig.model_validate({"name": "ops", "url_env": "ADVISOR_TEST_URL"})
    assert "T0SECRETTOKEN" not in str(err.value) and "url_env" in str(err.value)

    with pytest.raises(pydantic.ValidationError) as err:
        ReceiverConfig.model_validate({"name": "ops", "url": "http://h/x", "hmac_secret": "hunter2query", "oops": 1})
    assert "hunter2query" not in str(err.value)

    # a secret that vanished between validation and start-up: a ConfigError naming the variable only
    monkeypatch.setenv("ADVISOR_TEST_URL", "http://127.0.0.1:1/T0SECRETTOKEN")
    cfg = ReceiverConfig.model_validate({"name": "ops", "url_env": "ADVISOR_TEST_URL"})
    monkeypatch.delenv("ADVISOR_TEST_URL")
    with pytest.raises(ConfigError) as cerr:
        build_notifier([cfg], None, None)
    assert "ADVISOR_TEST_URL" in str(cerr.value) and "T0SECRETTOKEN" not in str(cerr.value)
