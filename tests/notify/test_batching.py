"""Issue 13, "notifications operators can route", against a real webhook receiver on loopback.

* One evaluation cycle's transitions of one group key go out in one POST (Alertmanager's webhook body, version
  "4", with every alert of the group); other group keys in their own POST; ``group_by`` picks the labels.
* ``externalURL`` is the advisor's URL and each ``generatorURL`` the deployment's section of its status page.
* The runbook base is configurable; a ``critical`` recommendation below confidence 0.5 goes out as ``warning``.
* Re-sends (retries) keep the alerts' ids and idempotency keys and are counted as ``resent``, never as ``sent``.
* The outbox keeps batches across a restart, and reads the previous release's outbox (written by commit
  163121f's code: ``tests/fixtures/previous_release_notify``).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic
import pytest

from advisor import conventions as c
from advisor.domain import Recommendation
from advisor.notify.config import ReceiverConfig
from advisor.notify.notifier import build_notifier
from advisor.notify.outbox import OUTBOX_VERSION
from advisor.notify.payload import Links
from advisor.notify.receivers import idempotency_key
from tests.notify.conftest import Hook, rec

FAST = {"backoff_seconds": 0.02, "max_backoff_seconds": 0.1, "timeout_seconds": 2}
EXTERNAL = "https://advisor.example.internal:8443/capacity/"
WIKI = "https://wiki.example.internal/ops/capacity-advisor-runbook"
LINKS = Links(EXTERNAL, WIKI)
PREVIOUS_RELEASE = Path(__file__).resolve().parent.parent / "fixtures" / "previous_release_notify"


class Events:
    """The metrics callback: every (receiver, outcome, queued) it was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def __call__(self, receiver: str, outcome: str, queued: int) -> None:
        self.seen.append((receiver, outcome, queued))

    def count(self, outcome: str, receiver: str | None = None) -> int:
        return sum(1 for r, o, _ in self.seen if o == outcome and receiver in (None, r))


def webhook(hook: Hook, **kw: Any) -> ReceiverConfig:
    return ReceiverConfig.model_validate({"name": "ops", "url": hook.url, **FAST, **kw})


def default_runbook(rule: str) -> str:
    return f"{c.RUNBOOK_BASE}#{rule.replace('_', '-')}"


def cycle_recs() -> list[Any]:
    """Three recommendations opened in one cycle on chat-8b, two on code-70b (distinct ids and dials)."""
    chat = [rec(i, runbook=default_runbook("kv_saturation")) for i in range(3)]
    code = [
        rec(10 + i, deployment="code-70b", rule="queue_growth", runbook=default_runbook("queue_growth"))
        for i in range(2)
    ]
    return chat + code


def bodies_by_deployment(hook: Hook) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for h in hook.acked():
        body = h.json()
        out.setdefault(body["groupLabels"]["deployment"], []).append(body)
    return out


def test_one_cycle_sends_one_post_per_group_key_with_every_alert_of_the_group(hook: Hook) -> None:
    events = Events()
    n = build_notifier([webhook(hook)], None, events)
    recs = cycle_recs()
    try:
        n.submit_cycle([("opened", r) for r in recs], LINKS)
        assert n.flush(10)
        assert hook.count() == 2  # two deployments, two group keys: two POSTs, not five
        by_dep = bodies_by_deployment(hook)
        (chat,) = by_dep["chat-8b"]
        (code,) = by_dep["code-70b"]
        assert [a["fingerprint"] for a in chat["alerts"]] == [r.id for r in recs[:3]]
        assert [a["fingerprint"] for a in code["alerts"]] == [r.id for r in recs[3:]]
        assert chat["version"] == "4" and chat["status"] == "firing" and chat["truncatedAlerts"] == 0
        assert chat["groupKey"] == '{}:{deployment="chat-8b"}'
        assert chat["groupLabels"] == {"deployment": "chat-8b"}
        # a recommendation without a problem (written before issue 13) gives its rule as the problem
        assert chat["commonLabels"]["deployment"] == "chat-8b" and chat["commonLabels"]["problem"] == "kv_saturation"
        assert "id" not in chat["commonLabels"]  # the alerts differ there
        assert chat["commonAnnotations"]["rule"] == "kv_saturation" and "dial" not in chat["commonAnnotations"]
        assert chat["receiver"] == "ops"
        assert chat["externalURL"] == EXTERNAL
        assert {a["generatorURL"] for a in chat["alerts"]} == {
            "https://advisor.example.internal:8443/capacity/#dep-chat-8b"
        }
        assert {a["generatorURL"] for a in code["alerts"]} == {
            "https://advisor.example.internal:8443/capacity/#dep-code-70b"
        }
        assert {a["annotations"]["runbook_url"] for a in chat["alerts"]} == {f"{WIKI}#kv-saturation"}
        assert {a["annotations"]["runbook_url"] for a in code["alerts"]} == {f"{WIKI}#queue-growth"}
        # each alert carries its own idempotency key; the request's header is the batch's, stable
        assert [a["annotations"]["idempotency_key"] for a in chat["alerts"]] == [
            idempotency_key("opened", r) for r in recs[:3]
        ]
        assert all(h.key is not None and h.key.startswith("batch-") for h in hook.acked())

        # the next cycle resolves two of chat-8b's: one POST, status resolved, both alerts
        resolved = [replace(r, resolved_at=r.opened_at + 60) for r in recs[:2]]
        n.submit_cycle([("resolved", r) for r in resolved], LINKS)
        assert n.flush(10)
        assert hook.count() == 3
        last = hook.acked()[-1].json()
        assert last["status"] == "resolved" and [a["fingerprint"] for a in last["alerts"]] == [r.id for r in recs[:2]]
        assert all(a["endsAt"] != "0001-01-01T00:00:00Z" for a in last["alerts"])
    finally:
        n.close(2)
    # every alert transition counted once as sent (5 opened + 2 resolved), none as resent
    assert events.count("sent") == 7 and events.count("resent") == 0
    assert n.stats()["ops"].sent == 7


def test_group_by_names_the_labels_that_split_batches(hook: Hook) -> None:
    n = build_notifier([webhook(hook, group_by=["deployment", "id"])], None, None)
    try:
        n.submit_cycle([("opened", r) for r in cycle_recs()], LINKS)
        assert n.flush(10)
    finally:
        n.close(2)
    assert hook.count() == 5
    assert {h.json()["groupKey"] for h in hook.acked()} >= {'{}:{deployment="chat-8b", id="0000000000000000"}'}
    with pytest.raises(pydantic.ValidationError, match="group_by must name distinct alert labels"):
        webhook(hook, group_by=["instance"])
    # the current turn is an annotation, not a label: it cannot split groups
    with pytest.raises(pydantic.ValidationError, match="group_by must name distinct alert labels"):
        webhook(hook, group_by=["deployment", "dial"])


def test_a_critical_recommendation_at_low_confidence_goes_out_as_a_warning(hook: Hook) -> None:
    unsure = rec(1, severity="critical", confidence=0.35)
    sure = rec(2, severity="critical", confidence=0.9)
    n = build_notifier([webhook(hook)], None, None)
    try:
        n.submit_cycle([("opened", unsure), ("opened", sure)], LINKS)
        assert n.flush(10)
    finally:
        n.close(2)
    (hit,) = hook.acked()
    severities = {a["fingerprint"]: a["labels"]["severity"] for a in hit.json()["alerts"]}
    assert severities == {unsure.id: "warning", sure.id: "critical"}


def test_a_retry_resends_the_same_ids_and_keys_and_is_counted_apart(hook: Hook) -> None:
    hook.script = [503, 503]  # the first two attempts fail, the third is acknowledged
    events = Events()
    n = build_notifier([webhook(hook)], None, events)
    recs = cycle_recs()[:3]
    try:
        n.submit_cycle([("opened", r) for r in recs], LINKS)
        assert n.flush(10)
    finally:
        n.close(2)
    assert hook.count() == 3
    assert len({h.raw for h in hook.hits}) == 1  # the same body every time: same ids, same per-alert keys
    assert len({h.key for h in hook.hits}) == 1  # and the same request key
    assert events.count("sent") == 3  # each transition once
    assert events.count("resent") == 6  # two re-sends of three alerts
    stats = n.stats()["ops"]
    assert (stats.sent, stats.resent, stats.failed) == (3, 6, 0)


def test_batches_wait_in_the_outbox_across_a_restart(hook: Hook, tmp_path: Path) -> None:
    hook.outage = True
    recs = cycle_recs()
    n = build_notifier([webhook(hook)], tmp_path, None)
    n.submit_cycle([("opened", r) for r in recs], LINKS)
    n.close(0.3)
    saved = json.loads((tmp_path / "ops.outbox.json").read_text())
    assert saved["version"] == OUTBOX_VERSION == 3
    assert [len(e["alerts"]) for e in saved["pending"]] == [3, 2]
    assert saved["pending"][0]["external_url"] == EXTERNAL
    failed_keys = {h.key for h in hook.hits}

    hook.outage = False
    events = Events()
    again = build_notifier([webhook(hook)], tmp_path, events)  # no external URL given: the entries carry theirs
    try:
        assert again.flush(10)
        # submitted again (a restored lifecycle): already waiting or delivered, so not sent twice
        again.submit_cycle([("opened", r) for r in recs], LINKS)
        assert again.flush(5)
    finally:
        again.close(2)
    acked = hook.acked()
    # the same request keys as were kept (the first one also tried before the restart), in order
    assert [h.key for h in acked] == [e["key"] for e in saved["pending"]]
    assert acked[0].key in failed_keys
    fingerprints = [a["fingerprint"] for h in acked for a in h.json()["alerts"]]
    assert fingerprints == [r.id for r in recs]
    assert {h.json()["externalURL"] for h in acked} == {EXTERNAL}
    assert events.count("sent") == 5


def test_the_previous_release_outbox_is_delivered_after_an_upgrade(hook: Hook, tmp_path: Path) -> None:
    for name in ("ops", "am"):
        shutil.copy(PREVIOUS_RELEASE / f"{name}.outbox.json", tmp_path / f"{name}.outbox.json")
    old = json.loads((tmp_path / "ops.outbox.json").read_text())
    assert old["version"] == 1 and "alerts" not in old["pending"][0]  # written by 163121f's code
    events = Events()
    am = ReceiverConfig.model_validate({"name": "am", "type": "alertmanager", "url": hook.url, **FAST})
    t0 = time.monotonic()
    n = build_notifier(  # a clock five minutes after the file was written, within its retention
        [webhook(hook), am],
        tmp_path,
        events,
        external_url=EXTERNAL,
        clock=lambda: 1_790_000_600.0 + time.monotonic() - t0,
    )
    try:
        assert n.flush(10)
        # the previous release delivered this one's opening (its "delivered" list): not sent again
        resolved = Recommendation.from_record(old["pending"][1]["recommendation"])
        n.submit("opened", replace(resolved, resolved_at=None))
        assert n.flush(5)
    finally:
        n.close(2)
    webhook_hits = [h for h in hook.acked() if h.path == "/hook"]
    am_hits = [h for h in hook.acked() if h.path == "/hook/api/v2/alerts"]
    assert [h.key for h in webhook_hits] == [e["key"] for e in old["pending"]]
    assert [h.key for h in am_hits] == [e["key"] for e in old["pending"]]
    firing = webhook_hits[0].json()
    assert firing["alerts"][0]["fingerprint"] == "5eed000000000001"
    assert firing["alerts"][0]["generatorURL"] == "https://advisor.example.internal:8443/capacity/#dep-chat-8b"
    # written critical at confidence 0.4 by the previous release: sent as a warning now
    assert firing["alerts"][0]["labels"]["severity"] == "warning"
    (am_firing,) = am_hits[0].json()
    assert am_firing["labels"]["severity"] == "warning"
    # alerts the previous release accepted keep the label set of that release (rule, dial, action), so that
    # Alertmanager's resolution of them matches the alert that fired; new ones get the fixed labels
    legacy = {"alertname", "deployment", "rule", "dial", "action", "severity"}
    (am_resolved,) = am_hits[1].json()
    assert set(am_firing["labels"]) == set(am_resolved["labels"]) == legacy
    assert (am_firing["labels"]["rule"], am_firing["labels"]["dial"]) == ("queue_growth", "replicas")
    assert set(firing["alerts"][0]["labels"]) == legacy
    assert events.count("sent") == 4
    rewritten = json.loads((tmp_path / "ops.outbox.json").read_text())
    assert rewritten["version"] == 3 and rewritten["pending"] == []
    assert "5eed000000000001-firing-1790000000000" in rewritten["delivered"]
