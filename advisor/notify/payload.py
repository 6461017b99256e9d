"""The webhook body, shaped as Alertmanager's webhook notifier sends it (version "4"), one body per group.

Shape (prometheus/alertmanager ``notify/webhook/webhook.go`` ``Message``, which embeds ``template.Data`` of
``template/template.go``)::

    {"version": "4", "groupKey": "{}:{deployment=\\"chat-8b\\"}", "truncatedAlerts": 0,
     "status": "firing"|"resolved", "receiver": "ops",
     "groupLabels": {"deployment": "chat-8b"}, "commonLabels": {...}, "commonAnnotations": {...},
     "externalURL": "http://advisor:9188/",
     "alerts": [{"status": ..., "labels": {"alertname", "deployment", "problem", "severity", "id"},
                 "annotations": {"summary", "description", "runbook_url", "rule", "dial", "action", "flag",
                                 "current", "suggested", "confidence", "predicted_effect", ...},
                 "startsAt": RFC3339, "endsAt": RFC3339,
                 "generatorURL": "http://advisor:9188/#dep-chat-8b", "fingerprint": "<recommendation id>"}]}

As Alertmanager: the alerts of one group key travel in one body; ``status`` is ``firing`` while any alert in it
fires; ``commonLabels``/``commonAnnotations`` are the pairs every alert shares; ``groupKey`` is
``<route key>:<group labels>`` (``dispatch/dispatch.go`` ``aggrGroup.GroupKey``; the advisor has one route,
``{}``). ``externalURL`` is the advisor's own URL (``--web.external-url``) and ``generatorURL`` the deployment's
section of its status page.

**endsAt.** A resolved alert ends at its resolve time. A firing alert carries the time it is vouched for until,
as Prometheus sets it when it sends to Alertmanager: ``evaluation time + 4 × resend interval`` (the receiver's
``resend_interval``, :data:`ENDS_AT_RESEND_FACTOR`). Prometheus 2.42 ``rules/alerting.go``
``AlertingRule.sendAlerts`` sets ``ValidUntil = ts + 4 × max(resendDelay, interval)`` ("allow for two Eval or
Alertmanager send failures") and ``rules/manager.go`` ``SendAlerts`` sends it as ``EndsAt`` while the alert is
unresolved, its ``ResolvedAt`` after. A webhook body is not re-sent, so the evaluation interval does not enter
here (Alertmanager keep-alives allow for it: :mod:`advisor.notify.outbox`). This departs from Alertmanager
0.25's own webhook, which hides a firing alert's end (``types/types.go`` ``Alerts``: "If the end timestamp is not
reached yet, do not expose it" — the zero time, :data:`ZERO_TIME`): a consumer of the advisor's webhook learns
how long the advisor vouches for a firing alert, so an alert whose advisor died does not fire forever there
either. Only ``type: alertmanager`` receivers are re-sent while firing (their ``endsAt`` moves on with each
re-send); a webhook body is sent once per transition, its ``endsAt`` counted from the cycle that accepted it
(the same bytes on every attempt). Without a time to vouch until (``ends_at`` not given) a firing alert's
``endsAt`` is :data:`ZERO_TIME`, as Alertmanager writes it.

An alert's labels are fixed for the incident's whole life (:func:`alert_labels`): Alertmanager identifies an alert
by its label set, and the incident's current turn, which may change while it is open, is annotated instead.

Two guards apply whatever the recommendation says: a ``critical`` recommendation with confidence below
:data:`advisor.conventions.LOW_CONFIDENCE` goes out as ``warning``, and the runbook's default prefix
(:data:`advisor.conventions.RUNBOOK_BASE`) is replaced by the configured ``runbook_base_url``.

Pure: times come from the recommendations.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from advisor import conventions as c
from advisor.domain import Recommendation, rfc3339
from advisor.platforms import flag_text

ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero time, which Alertmanager's webhook sends as endsAt of a firing alert (``types/types.go`` ``Alerts``)."""
ENDS_AT_RESEND_FACTOR = 4
"""A firing alert's endsAt is this many resend intervals after it is sent, as Prometheus 2.42 sets ``ValidUntil``
(``rules/alerting.go`` ``AlertingRule.sendAlerts``: ``ts.Add(4 * delta)``)."""
DEFAULT_GROUP_BY: tuple[str, ...] = (c.LABEL_DEPLOYMENT,)
"""Alerts are grouped by deployment unless a receiver's ``group_by`` says otherwise."""
LABEL_PROBLEM = "problem"
"""The incident's problem (:attr:`advisor.domain.Recommendation.problem`, e.g. ``saturation``)."""
LABEL_ID = "id"
"""The incident's id (:attr:`advisor.domain.Recommendation.id`; also the webhook ``fingerprint``)."""
GROUPABLE_LABELS: tuple[str, ...] = (
    "alertname",
    c.LABEL_DEPLOYMENT,
    LABEL_PROBLEM,
    c.LABEL_SEVERITY,
    LABEL_ID,
)
"""The labels every alert carries (:func:`alert_labels`), fixed for the incident's life: the names ``group_by``
may use."""
LEGACY_LABELS: tuple[str, ...] = (
    "alertname",
    c.LABEL_DEPLOYMENT,
    c.LABEL_RULE,
    c.LABEL_DIAL,
    c.LABEL_ACTION,
    c.LABEL_SEVERITY,
)
"""The label set of the releases before the labels were fixed (:func:`legacy_labels`): alerts they fired, still
in an outbox they wrote, are resolved and re-sent with it."""
ROUTE_KEY = "{}"
"""Alertmanager's key of its root route; the advisor's single grouping stands in for it."""
IDEMPOTENCY_ANNOTATION = "idempotency_key"
"""Each alert's own idempotency key, so a receiver can drop a repeat alert by alert inside a batch."""


@dataclass(frozen=True, slots=True)
class Links:
    """Where notifications point back to.

    Attributes:
        external_url: the advisor's own URL as users reach it (``--web.external-url``, e.g.
            ``http://advisor.internal:9188/``); ``""`` when unknown (then no ``generatorURL``).
        runbook_base_url: replaces :data:`advisor.conventions.RUNBOOK_BASE` in every runbook link (config
            ``runbook_base_url``); ``""`` keeps the default.
    """

    external_url: str = ""
    runbook_base_url: str = ""


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


def notified_severity(rec: Recommendation) -> str:
    """The severity sent: a firing alert is ``critical`` only at confidence ≥
    :data:`~advisor.conventions.LOW_CONFIDENCE` (below it, ``warning``) — a second guard after the lifecycle's,
    which caps the severity at opening. A resolved alert keeps the incident's severity (fixed at opening, as
    its firing alert was sent): Alertmanager matches a resolution to its alert by the label set, so a lower
    confidence at resolution must not change the label."""
    if rec.resolved_at is None and rec.severity == "critical" and not rec.confidence >= c.LOW_CONFIDENCE:
        return "warning"
    return rec.severity


def runbook_link(runbook: str, base: str) -> str:
    """``runbook`` with its default prefix :data:`~advisor.conventions.RUNBOOK_BASE` replaced by ``base``:
    ``(RUNBOOK_BASE + "#kv-saturation", "https://wiki/runbook") → "https://wiki/runbook#kv-saturation"``.
    Other runbooks (a plugin's own) and an empty ``base`` leave it as it is."""
    if base and base != c.RUNBOOK_BASE and runbook.startswith(c.RUNBOOK_BASE):
        return base + runbook[len(c.RUNBOOK_BASE) :]
    return runbook


def with_links(rec: Recommendation, links: Links) -> Recommendation:
    """``rec`` as notified: runbook on the configured base, severity guarded (:func:`notified_severity`)."""
    runbook = runbook_link(rec.runbook, links.runbook_base_url)
    severity = notified_severity(rec)
    if runbook == rec.runbook and severity == rec.severity:
        return rec
    return replace(rec, runbook=runbook, severity=severity)


def deployment_url(external_url: str, deployment: str) -> str:
    """The deployment's section of the advisor's status page: ``<external_url>/#dep-<deployment>`` (the
    status page at ``/`` gives each deployment ``id='dep-<name>'``); ``""`` without an external URL."""
    if not external_url:
        return ""
    return f"{external_url.rstrip('/')}/#dep-{quote(deployment, safe='')}"


def alert_labels(rec: Recommendation) -> dict[str, str]:
    """The alert's identifying labels, the same for the whole life of the incident: ``alertname``,
    ``deployment``, ``problem`` (a record without one — written before issue 13 — gives its ``rule``, as
    :func:`advisor.rules.base.rule_problem` defaults), ``severity`` (fixed at opening; as
    :func:`notified_severity` gives it) and ``id``.

    Alertmanager identifies an alert by its label set, so nothing that changes while the incident is open goes
    here: the current turn (``rule``, ``dial``, ``action``, ``current``, ``suggested``, ``flag``) is in the
    annotations (:func:`alert`). With ``id``, each incident is its own Alertmanager alert — one-to-one with the
    webhook ``fingerprint`` and the advisor's ack and snooze — so a late or replayed resolution of an earlier
    incident of the same problem can never end the current one; routes, inhibitions and silences match on
    ``deployment``, ``problem`` and ``severity``, which never carry an id.
    """
    return {
        "alertname": c.ALERT_RECOMMENDATION,
        c.LABEL_DEPLOYMENT: rec.deployment,
        LABEL_PROBLEM: rec.problem or rec.rule,
        c.LABEL_SEVERITY: notified_severity(rec),
        LABEL_ID: rec.id,
    }


def legacy_labels(rec: Recommendation) -> dict[str, str]:
    """The label set an earlier release gave ``rec``'s alert (:data:`LEGACY_LABELS`): ``alertname``,
    ``deployment``, ``rule``, ``dial``, ``action`` and ``severity`` (as :func:`notified_severity` gives it)."""
    return {
        "alertname": c.ALERT_RECOMMENDATION,
        c.LABEL_DEPLOYMENT: rec.deployment,
        c.LABEL_RULE: rec.rule,
        c.LABEL_DIAL: rec.dial,
        c.LABEL_ACTION: rec.action,
        c.LABEL_SEVERITY: notified_severity(rec),
    }


def group_labels(
    rec: Recommendation, group_by: Sequence[str] = DEFAULT_GROUP_BY, labels: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The alert's labels (``labels``, default :func:`alert_labels`) named in ``group_by`` (a name the alert
    lacks is left out, as Alertmanager does)."""
    labels = alert_labels(rec) if labels is None else labels
    return {k: labels[k] for k in group_by if k in labels}


def _go_quote(value: str) -> str:
    """A label value as Prometheus's ``LabelSet.String`` writes it (Go's ``%q``; JSON escaping agrees for
    printable text)."""
    return json.dumps(value, ensure_ascii=False)


def group_key(labels: Mapping[str, str]) -> str:
    """``{}:{deployment="chat-8b"}``: Alertmanager's ``<route key>:<group labels>``, labels sorted by name."""
    inner = ", ".join(f"{k}={_go_quote(v)}" for k, v in sorted(labels.items()))
    return f"{ROUTE_KEY}:{{{inner}}}"


def valid_until(now: float, resend_interval: float) -> float:
    """A firing alert's ``endsAt`` when sent at ``now`` (unix seconds): ``now + 4 × resend_interval`` (seconds),
    as Prometheus sets ``ValidUntil`` (:data:`ENDS_AT_RESEND_FACTOR`)."""
    return now + ENDS_AT_RESEND_FACTOR * resend_interval


def alert(
    rec: Recommendation,
    external_url: str = "",
    key: str | None = None,
    labels: Mapping[str, str] | None = None,
    ends_at: float | None = None,
) -> dict[str, Any]:
    """One alert of the ``alerts`` array for a recommendation (firing while open, resolved after);
    ``key``, when given, is its idempotency key (annotation ``idempotency_key``); ``labels``, when given, the
    label set the alert fired with (default :func:`alert_labels`); ``ends_at`` (unix seconds), when given, the
    ``endsAt`` of a firing alert (see the module docstring; a resolved one ends at its resolve time, a firing one
    without ``ends_at`` at :data:`ZERO_TIME`). The incident's current turn — ``rule``,
    ``dial``, ``action``, ``current``, ``suggested``, ``flag`` — and its words are annotations: they may change
    while the alert keeps its identity."""
    resolved = rec.resolved_at is not None
    annotations = {
        "summary": rec.summary,
        "description": rec.description,
        "runbook_url": rec.runbook,
        c.LABEL_RULE: rec.rule,
        c.LABEL_DIAL: rec.dial,
        c.LABEL_ACTION: rec.action,
        "flag": flag_text(rec.flag, rec.evidence),
        "current": json.dumps(finite(rec.current), allow_nan=False, default=str),
        "suggested": json.dumps(finite(rec.suggested), allow_nan=False, default=str),
        "confidence": f"{rec.confidence:.2f}",
        "predicted_effect": json.dumps(finite(rec.predicted_effect), sort_keys=True, allow_nan=False, default=str),
    }
    if key is not None:
        annotations[IDEMPOTENCY_ANNOTATION] = key
    if resolved and rec.resolved_reason:
        annotations["resolved_reason"] = rec.resolved_reason  # e.g. removed: a reload removed the deployment
    return {
        "status": "resolved" if resolved else "firing",
        "labels": alert_labels(rec) if labels is None else dict(labels),
        "annotations": annotations,
        "startsAt": rfc3339(rec.opened_at),
        "endsAt": _ends(rec, ends_at),
        "generatorURL": deployment_url(external_url, rec.deployment),
        "fingerprint": rec.id,
    }


def _ends(rec: Recommendation, ends_at: float | None) -> str:
    if rec.resolved_at is not None:
        return rfc3339(rec.resolved_at)
    return ZERO_TIME if ends_at is None else rfc3339(ends_at)


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The pairs every map shares (Alertmanager's ``commonLabels``/``commonAnnotations``)."""
    if not maps:
        return {}
    first = maps[0]
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in maps[1:])}


def webhook_message(
    recs: Recommendation | Sequence[Recommendation],
    receiver: str,
    external_url: str = "",
    *,
    keys: Sequence[str] | None = None,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    labels: Sequence[Mapping[str, str] | None] | None = None,
    ends_at: float | None = None,
) -> dict[str, Any]:
    """The whole webhook body for the alerts of one group (one recommendation, or several sharing the labels
    ``group_by`` names; the first gives ``groupLabels``). ``keys`` are their idempotency keys, in order;
    ``labels`` the label sets they fired with (``None``: :func:`alert_labels`); ``ends_at`` the ``endsAt`` of
    the firing ones (unix seconds, :func:`valid_until`; ``None``: :data:`ZERO_TIME`).

    Raises:
        ValueError: no recommendation, or ``keys`` or ``labels`` of another length.
    """
    batch = [recs] if isinstance(recs, Recommendation) else list(recs)
    if not batch:
        raise ValueError("a webhook message needs at least one alert")
    if keys is not None and len(keys) != len(batch):
        raise ValueError(f"{len(keys)} idempotency keys for {len(batch)} alerts")
    if labels is not None and len(labels) != len(batch):
        raise ValueError(f"{len(labels)} label sets for {len(batch)} alerts")
    alerts = [
        alert(r, external_url, None if keys is None else keys[i], None if labels is None else labels[i], ends_at)
        for i, r in enumerate(batch)
    ]
    group = {k: alerts[0]["labels"][k] for k in group_by if k in alerts[0]["labels"]}
    firing = any(a["status"] == "firing" for a in alerts)
    return {
        "version": "4",
        "groupKey": group_key(group),
        "truncatedAlerts": 0,
        "status": "firing" if firing else "resolved",
        "receiver": receiver,
        "groupLabels": group,
        "commonLabels": _common([a["labels"] for a in alerts]),
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": external_url,
        "alerts": alerts,
    }
