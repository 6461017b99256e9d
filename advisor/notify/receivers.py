"""Receivers: how one notification becomes one HTTP request (URL, headers, body bytes).

A receiver does no I/O; the outbox worker (:mod:`advisor.notify.outbox`) sends what it builds. Three kinds:

* :class:`WebhookReceiver` — the Alertmanager-v4-shaped body of :mod:`advisor.notify.payload`, a firing alert's
  ``endsAt`` the time the notification was accepted + 4 × the receiver's ``resend_interval`` (as Prometheus
  sets it at evaluation; one body per transition, never re-sent, the same bytes on every attempt); with a
  shared secret, ``X-Advisor-Signature: sha256=<hex>`` is the HMAC-SHA256 of the exact body bytes. Verify it as::

      expected = "sha256=" + hmac.new(secret, request_body, hashlib.sha256).hexdigest()
      hmac.compare_digest(expected, request.headers["X-Advisor-Signature"])

* :class:`SlackReceiver` — a Slack incoming webhook: Block Kit blocks (what, why, the numbers, the flag) and a
  ``text`` fallback for notifications and clients without blocks. One message per transition, never repeated
  (a Slack message cannot be withdrawn or expire, so it carries no ``endsAt``: its resolution is the message
  that ends it).
* :class:`AlertmanagerReceiver` — Alertmanager's API v2: ``POST {url}/api/v2/alerts`` with a JSON list of
  postable alerts ``{labels, annotations, startsAt, endsAt, generatorURL}``. As Prometheus does
  (``rules/manager.go`` ``sendAlerts``), a firing alert carries ``endsAt = now + 4 × resend_interval`` and is
  re-sent every ``resend_interval`` while it stays open (keep-alives count ``endsAt`` from the last evaluation
  cycle, :mod:`advisor.notify.outbox`), so Alertmanager resolves it by itself if the advisor dies or its
  evaluation stops; on resolve ``endsAt`` is the resolve time.

Every request carries ``X-Advisor-Idempotency-Key`` (stable per notification: recommendation id, status and
the transition's time, e.g. ``3f2a…-firing-1790000000000``) so a receiver can drop a repeat.

The URL (and the HMAC key, and a bearer token) are secrets: a receiver's repr and :attr:`safe_url` show only the
scheme, host and port.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from advisor import __version__
from advisor.domain import Recommendation, rfc3339
from advisor.notify.payload import (
    DEFAULT_GROUP_BY,
    ENDS_AT_RESEND_FACTOR,
    alert,
    finite,
    valid_until,
    webhook_message,
)
from advisor.redact import REDACTED, redact_secret_url, url_secrets

IDEMPOTENCY_HEADER = "X-Advisor-Idempotency-Key"
SIGNATURE_HEADER = "X-Advisor-Signature"
USER_AGENT = f"capacity-advisor/{__version__}"
ALERTMANAGER_ENDS_AT_FACTOR = ENDS_AT_RESEND_FACTOR
"""Prometheus sets a firing alert's endsAt to 4 × the resend delay ahead (``rules/alerting.go``; see
:data:`advisor.notify.payload.ENDS_AT_RESEND_FACTOR`)."""


def _json_body(obj: Any, *, ensure_ascii: bool = True) -> bytes:
    """A request body as strict JSON: NaN and ±Inf become ``null`` (Python's ``json`` would write bare
    ``NaN``/``Infinity``, which receivers' JSON parsers reject), unknown objects as ``str()``."""
    return json.dumps(finite(obj), ensure_ascii=ensure_ascii, allow_nan=False, default=str).encode()


@dataclass(frozen=True, slots=True)
class AlertNote:
    """One alert transition inside a notification: its idempotency key, ``opened`` or ``resolved``, the
    recommendation at the transition (``resolved_at`` set when resolved) and the alert's label set, fixed when
    it first fired (``None``: :func:`advisor.notify.payload.alert_labels` of the recommendation)."""

    key: str
    kind: str
    recommendation: Recommendation
    labels: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """One request's worth of alert transitions for one receiver, as the outbox keeps it: a single transition
    (the fields ``key``, ``kind``, ``recommendation``) or the batch of one group key in one evaluation cycle
    (``alerts``; then ``key``, ``kind`` and ``recommendation`` are the batch's, see :func:`batch_notification`).

    Attributes:
        key: the idempotency key of the request (:func:`idempotency_key` for one alert; :func:`batch_key`
            for several).
        kind: ``opened`` or ``resolved`` (:class:`advisor.rules.lifecycle.Transition` kinds); a batch is
            ``opened`` while any of its alerts opens.
        recommendation: the (first) alert's recommendation.
        group_key: the alerts' group key (:func:`advisor.notify.payload.group_key`; a deployment name in
            entries written before issue 13).
        accepted_at: unix seconds the outbox accepted it (retention counts from here).
        alerts: the batch's alert transitions in order; empty for a single transition.
        external_url: the advisor's URL when it was accepted (links in the body); ``None``: the receiver's.
    """

    key: str
    kind: str
    recommendation: Recommendation
    group_key: str
    accepted_at: float
    alerts: tuple[AlertNote, ...] = ()
    external_url: str | None = None

    @property
    def members(self) -> tuple[AlertNote, ...]:
        """The alert transitions this notification carries (at least one)."""
        return self.alerts or (AlertNote(self.key, self.kind, self.recommendation),)


def batch_key(keys: Sequence[str]) -> str:
    """The idempotency key of a request carrying several alerts: ``batch-<first 32 hex of SHA-256 over the
    alerts' keys, sorted, newline-joined>`` (one alert: its own key). Stable across retries and restarts."""
    if len(keys) == 1:
        return keys[0]
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:32]
    return f"batch-{digest}"


def batch_notification(
    members: Sequence[AlertNote], group_key: str, accepted_at: float, external_url: str | None = None
) -> Notification:
    """The notification carrying ``members`` (at least one) in one request.

    Raises:
        ValueError: ``members`` is empty.
    """
    if not members:
        raise ValueError("a notification carries at least one alert")
    first = members[0]
    kind = "opened" if any(m.kind == "opened" for m in members) else "resolved"
    if len(members) == 1 and first.labels is None:
        return Notification(first.key, first.kind, first.recommendation, group_key, accepted_at, (), external_url)
    key = batch_key([m.key for m in members])
    return Notification(key, kind, first.recommendation, group_key, accepted_at, tuple(members), external_url)


def idempotency_key(kind: str, rec: Recommendation) -> str:
    """``<recommendation id>-<firing|resolved>-<transition time in unix ms>``: the same for every attempt and
    every restart, different for each transition."""
    resolved = kind == "resolved"
    ts = rec.resolved_at if resolved and rec.resolved_at is not None else rec.opened_at
    return f"{rec.id}-{'resolved' if resolved else 'firing'}-{round(ts * 1000)}"


class Request(NamedTuple):
    """What a receiver asks the worker to POST. The repr hides the URL and any Authorization header."""

    url: str
    headers: dict[str, str]
    body: bytes

    def __repr__(self) -> str:
        headers = {k: (REDACTED if k.lower() == "authorization" else v) for k, v in self.headers.items()}
        return f"Request(url={redact_secret_url(self.url)!r}, headers={headers!r}, body=<{len(self.body)} bytes>)"


class Receiver(Protocol):
    """What the outbox worker needs from a receiver."""

    name: str
    safe_url: str
    resend_interval: float | None
    """Alertmanager only: re-send active alerts this often; ``None`` for receivers that do not."""
    batching: str
    """How one cycle's transitions are split into requests: ``group`` (one per group key, by ``group_by``),
    ``all`` (one for the whole cycle) or ``none`` (one per transition)."""
    group_by: tuple[str, ...]
    """The alert labels whose values make the group key."""
    external_url: str
    """The advisor's URL for links (``externalURL``, ``generatorURL``) when a notification does not carry one."""

    def build_request(self, note: Notification, now: float) -> Request:
        """The request delivering ``note`` at ``now``."""
        ...

    def build_resend(
        self,
        active: Sequence[Recommendation],
        now: float,
        labels: Sequence[Mapping[str, str] | None] | None = None,
        ends_at: float | None = None,
    ) -> Request:
        """The request re-sending still-active alerts (only called when ``resend_interval`` is set), each with the
        label set it fired with (``labels``, in order; ``None``: its own) and ``endsAt`` = ``ends_at`` (unix
        seconds; ``None``: ``now`` + 4 × ``resend_interval``)."""
        ...

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never appear in a log line or an error (URL parts, keys, tokens)."""
        ...


def _token_like(segment: str) -> bool:
    """Whether a URL path segment may be a token, to be scrubbed wherever it appears: 8 characters or more with a
    digit or both letter cases (Slack's ``T0A1B2C3D``, a hex or base64 key), or 16 or more of anything. A word —
    ``redirect``, ``alertmanager`` — is not: scrubbing it everywhere garbled the receiver's own error text (breaker 24:
    "the receiver <redacted>s to …, and <redacted>s are not followed" for a ``/redirect`` path)."""
    if len(segment) >= 16:
        return True
    mixed = any(ch.isupper() for ch in segment) and any(ch.islower() for ch in segment)
    return len(segment) >= 8 and (any(ch.isdigit() for ch in segment) or mixed)


def _secret_parts(url: str) -> list[str]:
    """The URL and the parts of it that may be secret: the whole URL, path+query, path, query, user-info."""
    from urllib.parse import urlsplit

    parts = [url]
    try:
        s = urlsplit(url)
    except ValueError:
        return parts
    if s.query:
        parts += [f"{s.path}?{s.query}", s.query]
    if len(s.path) > 1:
        parts.append(s.path)
        parts += [seg for seg in s.path.split("/") if _token_like(seg)]
    if s.password:
        parts.append(s.password)
    if s.username:
        parts.append(s.username)
    return parts


class _Base:
    """Headers every receiver sends, secret bookkeeping and a redacted repr."""

    kind = "base"
    resend_interval: float | None = None
    batching = "none"

    def __init__(
        self,
        name: str,
        url: str,
        bearer_token: str | None = None,
        external_url: str = "",
        group_by: Sequence[str] = DEFAULT_GROUP_BY,
    ) -> None:
        self.name = name
        self.group_by = tuple(group_by)
        self._url = url
        self._bearer = bearer_token
        self.external_url = external_url
        self.safe_url = redact_secret_url(url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, url={self.safe_url!r})"

    def secrets(self) -> tuple[str, ...]:
        out = _secret_parts(self._url) + list(url_secrets(self._url))  # the latter: Basic auth echoed in base64
        if self._bearer:
            out.append(self._bearer)
        return tuple(dict.fromkeys(p for p in out if p))

    def _headers(self, key: str | None) -> dict[str, str]:
        h = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if key is not None:
            h[IDEMPOTENCY_HEADER] = key
        if self._bearer:
            h["Authorization"] = f"Bearer {self._bearer}"
        return h

    def build_resend(
        self,
        active: Sequence[Recommendation],
        now: float,
        labels: Sequence[Mapping[str, str] | None] | None = None,
        ends_at: float | None = None,
    ) -> Request:
        raise NotImplementedError(f"{type(self).__name__} does not re-send")

    def _external_url(self, note: Notification) -> str:
        return self.external_url if note.external_url is None else note.external_url


def signature(secret: bytes, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of body>``: the value of ``X-Advisor-Signature``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class WebhookReceiver(_Base):
    """A generic webhook: the Alertmanager-v4-shaped body, one per group key and cycle, optionally signed
    with a shared secret. A firing alert's ``endsAt`` is the notification's acceptance time (the evaluation
    cycle that produced it) + 4 × ``ends_interval`` (seconds; the receiver's ``resend_interval``, Prometheus's
    resend delay; :func:`advisor.notify.payload.valid_until`), so every attempt sends the same bytes (and the same
    signature), as Prometheus fixes ``ValidUntil`` at evaluation. The webhook is not re-sent: its
    ``resend_interval`` attribute stays ``None``."""

    kind = "webhook"
    batching = "group"

    def __init__(
        self,
        name: str,
        url: str,
        hmac_secret: bytes | None = None,
        bearer_token: str | None = None,
        external_url: str = "",
        group_by: Sequence[str] = DEFAULT_GROUP_BY,
        ends_interval: float = 60.0,
    ) -> None:
        super().__init__(name, url, bearer_token, external_url, group_by)
        self._hmac = hmac_secret
        self.ends_interval = ends_interval

    def secrets(self) -> tuple[str, ...]:
        extra = (self._hmac.decode(errors="replace"),) if self._hmac else ()
        return super().secrets() + extra

    def build_request(self, note: Notification, now: float) -> Request:
        members = note.members
        message = webhook_message(
            [m.recommendation for m in members],
            self.name,
            self._external_url(note),
            keys=[m.key for m in members],
            group_by=self.group_by,
            labels=[m.labels for m in members],
            ends_at=valid_until(note.accepted_at, self.ends_interval),
        )
        body = _json_body(message)
        headers = self._headers(note.key)
        if self._hmac is not None:
            headers[SIGNATURE_HEADER] = signature(self._hmac, body)
        return Request(self._url, headers, body)


# -- Slack -----------------------------------------------------------------------------------------------
_SEVERITY_ICON = {"critical": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}


def _esc(text: str) -> str:
    """Slack's three control characters (https://api.slack.com/reference/surfaces/formatting#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return json.dumps(v, default=str) if not isinstance(v, str) else v
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.4g}"
    return f"{int(v):,}" if abs(v) >= 10_000 else str(int(v))


def slack_message(rec: Recommendation) -> dict[str, Any]:
    """A Slack incoming-webhook body: header (status, deployment, dial), the summary and description (what and
    why), the numbers (current → suggested, confidence, predicted effect, evidence), the flag as code, and the
    runbook. Limits respected: header 150 characters, section text 3000, 10 fields of 2000."""
    resolved = rec.resolved_at is not None
    status = "RESOLVED" if resolved else "FIRING"
    icon = ":white_check_mark:" if resolved else _SEVERITY_ICON.get(rec.severity, ":large_blue_circle:")
    title = f"[{status}] {rec.deployment}: {rec.summary}"
    fields = [
        f"*Deployment*\n{_esc(rec.deployment)}",
        f"*Dial*\n{_esc(rec.dial)} ({_esc(rec.action)})",
        f"*Current → suggested*\n`{_esc(_num(rec.current))}` → `{_esc(_num(rec.suggested))}`",
        f"*Severity*\n{_esc(rec.severity)}",
        f"*Confidence*\n{rec.confidence:.2f}",
        f"*Rule*\n{_esc(rec.rule)}",
    ]
    numbers = [
        f"• {_esc(q)}: {_esc(_num(v.get('before')))} → {_esc(_num(v.get('after')))}"
        for q, v in sorted(rec.predicted_effect.items())
    ]
    evidence = [f"• {_esc(k)}: {_esc(_num(v))}" for k, v in sorted(rec.evidence.items())][:15]
    when = f"opened {rfc3339(rec.opened_at)}"
    if rec.resolved_at is not None:
        when += f", resolved {rfc3339(rec.resolved_at)}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(f"{status}: {rec.summary}", 150)}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": _cut(f"{icon} *{_esc(rec.summary)}*\n{_esc(rec.description)}", 3000),
            },
        },
        {"type": "section", "fields": [{"type": "mrkdwn", "text": _cut(f, 2000)} for f in fields]},
    ]
    if numbers:
        text = "*Predicted effect*\n" + "\n".join(numbers)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, 3000)}})
    if evidence:
        text = "*Evidence*\n" + "\n".join(evidence)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, 3000)}})
    if rec.flag:
        text = f"*Flag*\n```{_esc(rec.flag)}```"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, 3000)}})
    context = [f"recommendation `{_esc(rec.id)}`", when]
    if rec.runbook.startswith(("http://", "https://")) and not any(ch in rec.runbook for ch in "|<> "):
        context.append(f"<{rec.runbook}|runbook>")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(" · ".join(context), 3000)}]})
    fallback = f"{title} — {rec.flag}" if rec.flag else title
    return {"text": _cut(fallback, 3000), "blocks": blocks}


class SlackReceiver(_Base):
    """A Slack incoming webhook (the URL holds the token)."""

    kind = "slack"

    def build_request(self, note: Notification, now: float) -> Request:
        body = _json_body(slack_message(note.recommendation), ensure_ascii=False)
        return Request(self._url, self._headers(note.key), body)


# -- Alertmanager API v2 ------------------------------------------------------------------------------------
def postable_alert(
    rec: Recommendation,
    ends_at: float,
    external_url: str = "",
    key: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One element of ``POST /api/v2/alerts`` (Alertmanager's ``postableAlert``): the webhook alert's labels
    (``labels``, the set it fired with, when given) and annotations (with ``idempotency_key`` when ``key`` is
    given), ``startsAt`` the opening time, ``endsAt`` as given; ``generatorURL`` only when known (the API wants
    a URI there)."""
    a = alert(rec, external_url, key, labels)
    out: dict[str, Any] = {
        "labels": a["labels"],
        "annotations": a["annotations"],
        "startsAt": a["startsAt"],
        "endsAt": rfc3339(ends_at),
    }
    if a["generatorURL"]:
        out["generatorURL"] = a["generatorURL"]
    return out


class AlertmanagerReceiver(_Base):
    """Alertmanager's API v2; ``url`` is Alertmanager's base URL (with its route prefix, if any). One cycle's
    transitions go in one request (Alertmanager groups them itself); a re-send carries every active alert
    with its firing idempotency key."""

    kind = "alertmanager"
    batching = "all"

    def __init__(
        self,
        name: str,
        url: str,
        resend_interval: float = 60.0,
        bearer_token: str | None = None,
        external_url: str = "",
    ) -> None:
        super().__init__(name, url, bearer_token, external_url)
        self.resend_interval = resend_interval
        base = url.split("?", 1)[0].rstrip("/")
        self._endpoint = base if base.endswith("/api/v2/alerts") else base + "/api/v2/alerts"

    def secrets(self) -> tuple[str, ...]:
        return super().secrets() + tuple(_secret_parts(self._endpoint))

    def ends_at(self, now: float) -> float:
        """``endsAt`` of a firing alert sent at ``now``."""
        assert self.resend_interval is not None
        return valid_until(now, self.resend_interval)

    def build_request(self, note: Notification, now: float) -> Request:
        alerts = []
        external_url = self._external_url(note)
        for m in note.members:
            rec = m.recommendation
            resolved = m.kind == "resolved"
            ends = (rec.resolved_at if rec.resolved_at is not None else now) if resolved else self.ends_at(now)
            alerts.append(postable_alert(rec, ends, external_url, m.key, m.labels))
        return Request(self._endpoint, self._headers(note.key), _json_body(alerts))

    def build_resend(
        self,
        active: Sequence[Recommendation],
        now: float,
        labels: Sequence[Mapping[str, str] | None] | None = None,
        ends_at: float | None = None,
    ) -> Request:
        ends = self.ends_at(now) if ends_at is None else ends_at
        keys = [idempotency_key("opened", r) for r in active]
        fixed = [None] * len(active) if labels is None else list(labels)
        if len(fixed) != len(active):
            raise ValueError(f"{len(fixed)} label sets for {len(active)} alerts")
        body = _json_body(
            [postable_alert(r, ends, self.external_url, k, ls) for r, k, ls in zip(active, keys, fixed, strict=True)]
        )
        return Request(self._endpoint, self._headers(batch_key(keys) if keys else None), body)
