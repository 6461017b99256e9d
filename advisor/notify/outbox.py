"""The outbox: notifications that are never lost, delivered in order, once acknowledged never repeated.

Per receiver, an :class:`Outbox` holds the notifications accepted and not yet settled, in order, and — for
Alertmanager — the alerts still active (re-sent every ``resend_interval``). With a path it is a JSON file
written atomically on every change (a temporary file in the same folder, fsync, ``os.replace``, as
:mod:`advisor.state`)::

    {"version": 3, "receiver": "ops", "saved_at": 1790000000.0,
     "pending": [{"key": "batch-9c1e…", "kind": "opened", "group_key": "{}:{deployment=\"chat-8b\"}",
                  "accepted_at": 1790000000.0, "attempts": 2, "last_error": "HTTP 503: …",
                  "external_url": "http://advisor:9188/",
                  "alerts": [{"key": "3f2a…-firing-1790000000000", "kind": "opened",
                              "recommendation": {…every field…}, "labels": {"alertname": …, "id": "3f2a…"}},
                             …]}],
     "active": [{"recommendation": {…}, "last_sent_at": 1790000000.0, "labels": {…}}],
     "delivered": ["…the last 512 alert keys acknowledged…"]}

One pending entry is one request: a batch of alert transitions (one group key of one cycle). Version 1 files
(before issue 13: one entry per transition, its ``recommendation`` inline and no ``alerts``) are read as batches
of one, so an upgrade sends what the previous release left; the file is written back as version 3. A file of
another version is a :class:`~advisor.errors.StateError` (move it aside to start fresh).

**An alert's labels are fixed for its whole life.** Alertmanager identifies an alert by its label set, while an
incident's best turn (``rule``, ``dial``, ``action`` …) may change between opening and resolving. Each alert
transition and each active alert keeps the label set its alert fired with (``labels``): the resolved alert and
every keep-alive re-send carry it, whatever the recommendation says by then (its current turn travels in the
annotations). Version 3 stores it; the alerts of a version 1 or 2 file fired with the label set of those
releases (:func:`advisor.notify.payload.legacy_labels`, ``rule``/``dial``/``action``), so they are resolved and
re-sent with it — an upgrade leaves no alert of the previous release firing in Alertmanager until it times out.

An :class:`OutboxWorker` (one thread per receiver) delivers the head of the outbox and only then the next:

* **2xx** — the notification is removed from the outbox and the file written *before* the next is sent, so an
  acknowledged delivery is never repeated (a crash between the 2xx and the write can repeat it once; the
  ``X-Advisor-Idempotency-Key`` header lets the receiver drop that repeat).
* **5xx, 408, 429, connection errors, timeouts** — retried with exponential backoff and jitter:
  ``min(max_backoff, backoff × 2^(attempt−1)) × U(0.5, 1)`` (a 429's ``Retry-After`` is honoured up to
  ``max_backoff``); attempts survive restarts. With ``max_attempts`` set, the last failure fails it.
* **any other status (4xx, 3xx)** — not retried: the receiver rejected the body and retrying cannot help (as
  Alertmanager's notifiers); failed at once with the status and the start of the response body in the error.
* **retention** — a notification still undelivered ``retention`` seconds after it was accepted is dropped and
  counted (``dropped``), never silently.
* **rate limit** — a token bucket of ``rate_limit_per_minute`` tokens refilled at that rate per minute; a
  request without a token waits for one (never dropped). Re-sends to Alertmanager are not limited.
* **keep-alives** (Alertmanager) — every ``resend_interval`` the active alerts are re-sent with their ids and
  firing idempotency keys, ``endsAt`` = the last evaluation cycle that vouched for them (:meth:`OutboxWorker.vouch`,
  called by the notifier every cycle) + 4 × max(``resend_interval``, the cycle gap), as
  Prometheus 2.42 sets ``ValidUntil = ts + 4 × max(resendDelay, interval)`` at evaluation ``ts``
  (``rules/alerting.go`` ``AlertingRule.sendAlerts``). So an advisor whose evaluation loop stops — dead, or alive
  with a cycle hung — lets its alerts expire in Alertmanager: a worker thread still running does not keep them
  alive by itself.

Outcomes reach ``on_event(receiver, outcome, queued)`` once per alert transition, with outcome ``sent``,
``failed`` or ``dropped`` when it settles (exactly one of these per transition), ``resent`` for each further
POST carrying it (every attempt after the first; every Alertmanager keep-alive re-send, with the alert's firing
idempotency key), or ``queued`` once per accepted batch (or the backlog restored at start); ``queued`` is the
alert transitions now waiting.

Every request goes through the HTTP edge (:mod:`advisor.http_edge`, a :class:`~advisor.http_edge.Transport`):
``timeout_seconds`` is one deadline over the whole request — connecting, sending, the status line and headers
and the body read — so a receiver trickling its answer is abandoned at it (a timeout: retried, the notification
kept); at most :data:`ERROR_BODY_BYTES` of any response body are read (a 2xx whose body is longer, or slower than
the deadline, is still acknowledged: its status line said so). Edge failures map to the outcomes above: every
:class:`~advisor.http_edge.EdgeError` without a status (timeouts, refused, DNS, TLS, reset) is retried.

Nothing secret is ever logged or put in an error: URLs appear as :func:`advisor.redact.redact_secret_url`
shows them, and error texts (edge messages, response bodies) go through :func:`advisor.redact.scrub` with every
secret part of the receiver's URL, its HMAC key and bearer token: those, any ``Basic``/``Bearer`` credential and
the user-info and query string of any URL a body quotes become ``<redacted>``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from advisor import conventions as c
from advisor.domain import Recommendation
from advisor.errors import StateError
from advisor.files import read_text_capped
from advisor.http_edge import EdgeError, EdgeLimits, RequestsTransport, Transport
from advisor.notify.payload import ENDS_AT_RESEND_FACTOR, alert_labels, legacy_labels
from advisor.notify.receivers import AlertNote, Notification, Receiver, Request, batch_notification
from advisor.redact import install_urllib3_redaction, redact_secret_url, scrub

log = logging.getLogger(__name__)

OUTBOX_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
"""Version 1: one-transition entries (read as batches of one); versions 1 and 2: no ``labels`` (their alerts
fired with :func:`~advisor.notify.payload.legacy_labels`)."""
DELIVERED_MEMORY = 512
"""Keys of this many acknowledged notifications are remembered, so a re-submitted one is not sent again."""
RETRYABLE_STATUS = frozenset({408, 429})
"""Besides every 5xx: request timeout and too many requests (Slack answers 429 with Retry-After)."""
ERROR_BODY_BYTES = 1024
"""The byte cap on a receiver's response body: what of it is quoted in an error; more is never read."""

RESOLVED_KEY_PART = "-resolved-"
"""What separates a recommendation id from the time in a resolved idempotency key
(:func:`~advisor.notify.receivers.idempotency_key`)."""

EventCallback = Callable[[str, str, int], None]
"""``(receiver, outcome, queued)``: outcome is ``queued``, ``sent``, ``failed`` or ``dropped``."""


# -- persistence -------------------------------------------------------------------------------------------
@dataclass
class Entry:
    """A pending notification and how its delivery went so far."""

    note: Notification
    attempts: int = 0
    last_error: str | None = None


@dataclass
class ActiveAlert:
    """An open recommendation Alertmanager is told about again every ``resend_interval``, with the label set its
    alert fired with (``None``: :func:`~advisor.notify.payload.alert_labels` of the recommendation)."""

    recommendation: Recommendation
    last_sent_at: float | None = None
    labels: dict[str, str] | None = None

    def fired_labels(self) -> dict[str, str]:
        """The label set the alert fired with, which its re-sends and its resolution carry."""
        return dict(self.labels) if self.labels is not None else alert_labels(self.recommendation)


def outbox_file(folder: Path, receiver: str) -> Path:
    """``<folder>/<receiver>.outbox.json``; a name unsafe for a file name is replaced by its SHA-256 prefix."""
    import hashlib
    import re

    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}", receiver):
        stem = receiver
    else:
        stem = "receiver-" + hashlib.sha256(receiver.encode()).hexdigest()[:16]
    return folder / f"{stem}.outbox.json"


class Outbox:
    """One receiver's pending notifications (in order), active alerts and recently delivered keys.

    Not thread-safe: its :class:`OutboxWorker` guards it. Without a ``path`` it lives in memory only.

    Raises:
        StateError: the file exists and cannot be read (permissions), is of another version or of another
            receiver, or is corrupt and cannot be moved aside (a corrupt one is moved aside: :meth:`_set_aside`).
    """

    def __init__(self, receiver: str, path: Path | None = None) -> None:
        self.receiver = receiver
        self.path = path
        self.pending: deque[Entry] = deque()
        self.active: dict[str, ActiveAlert] = {}
        self.delivered: deque[str] = deque(maxlen=DELIVERED_MEMORY)
        if path is not None and path.exists():
            self._load(path)

    def __len__(self) -> int:
        return len(self.pending)

    def waiting(self) -> int:
        """Alert transitions waiting (over every pending batch)."""
        return sum(len(e.note.members) for e in self.pending)

    def _load(self, p: Path) -> None:
        try:
            text = read_text_capped(p)
        except OSError as exc:
            raise StateError(f"cannot read outbox {str(p)!r}: {exc.strerror}") from None
        except UnicodeDecodeError:
            self._set_aside(p, "not UTF-8 text")
            return
        if not text.strip():  # created empty (config management, `touch`): nothing was ever queued there
            return
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            self._set_aside(p, f"not JSON ({exc})")
            return
        except RecursionError:
            self._set_aside(p, "nested too deeply to be an outbox")
            return
        if not isinstance(data, dict) or "version" not in data:
            self._set_aside(p, "no version: not a capacity-advisor outbox")
            return
        if data["version"] not in READABLE_VERSIONS:
            raise StateError(
                f"outbox {str(p)!r} is version {data['version']!r}; this advisor reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}. "
                "Move it aside to start fresh (its undelivered notifications will not be sent)."
            )
        if data.get("receiver") != self.receiver:
            raise StateError(f"outbox {str(p)!r} belongs to receiver {data.get('receiver')!r}, not {self.receiver!r}")
        legacy = data["version"] < 3
        try:
            for e in data.get("pending", []):
                self.pending.append(Entry(_note_from_json(e, legacy), int(e.get("attempts", 0)), e.get("last_error")))
            for a in data.get("active", []):
                rec = Recommendation.from_record(a["recommendation"])
                last = a.get("last_sent_at")
                labels = legacy_labels(rec) if legacy else _labels(a.get("labels"))
                self.active[rec.id] = ActiveAlert(rec, None if last is None else float(last), labels)
            self.delivered.extend(str(k) for k in data.get("delivered", []))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.pending.clear()
            self.active.clear()
            self.delivered.clear()
            self._set_aside(p, f"a malformed entry: {exc!r}")

    def _set_aside(self, p: Path, why: str) -> None:
        """Move an outbox file whose content cannot be read to ``<name>.unreadable-<unix s>`` beside it and start
        empty, logged at ERROR with both paths: one receiver's corrupt file stopped the whole daemon, every deployment
        unmonitored (breaker 24); the file is kept for the operator, its notifications are not sent.

        Raises:
            StateError: the file cannot be moved (then it is refused as before, naming it).
        """
        aside = p.with_name(f"{p.name}.unreadable-{int(time.time())}")
        try:
            os.replace(p, aside)
        except OSError as exc:
            raise StateError(f"outbox {str(p)!r} is {why}, and cannot be moved aside: {exc.strerror}") from None
        log.error(
            "receiver=%s: outbox %r is %s; moved to %r and started empty (its undelivered notifications, if any, "
            "are in that file and will not be sent)",
            self.receiver,
            str(p),
            why,
            str(aside),
        )

    def to_json(self, now: float) -> dict[str, Any]:
        """The file's content."""
        return {
            "version": OUTBOX_VERSION,
            "receiver": self.receiver,
            "saved_at": now,
            "pending": [
                {
                    "key": e.note.key,
                    "kind": e.note.kind,
                    "group_key": e.note.group_key,
                    "accepted_at": e.note.accepted_at,
                    "attempts": e.attempts,
                    "last_error": e.last_error,
                    "external_url": e.note.external_url,
                    "alerts": [
                        {
                            "key": m.key,
                            "kind": m.kind,
                            "recommendation": m.recommendation.to_record(),
                            "labels": None if m.labels is None else dict(m.labels),
                        }
                        for m in e.note.members
                    ],
                }
                for e in self.pending
            ],
            "active": [
                {"recommendation": a.recommendation.to_record(), "last_sent_at": a.last_sent_at, "labels": a.labels}
                for a in self.active.values()
            ],
            "delivered": list(self.delivered),
        }

    def save(self, now: float) -> None:
        """Write the file atomically (no-op without a path).

        Raises:
            StateError: the folder is not writable (the message names the path).
        """
        if self.path is None:
            return
        p = self.path
        body = json.dumps(self.to_json(now), indent=1, default=str)
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
            tmp = None
        except OSError as exc:
            raise StateError(f"cannot write outbox {str(p)!r}: {exc.strerror}") from None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _labels(raw: Any) -> dict[str, str] | None:
    """A stored label set (``None`` stays ``None``).

    Raises:
        TypeError: not a mapping of strings.
    """
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise TypeError(f"labels must map strings to strings, got {raw!r}")
    return dict(raw)


def _note_from_json(e: Mapping[str, Any], legacy: bool = False) -> Notification:
    """A pending entry of any version: ``alerts`` (versions 2, 3) or one inline ``recommendation`` (version 1).
    ``legacy`` (versions 1, 2): each alert fired with :func:`~advisor.notify.payload.legacy_labels`.

    Raises:
        KeyError, TypeError, ValueError: a field is missing or of the wrong type.
    """
    group = str(e["group_key"])
    accepted = float(e["accepted_at"])
    ext = e.get("external_url")
    external_url = None if ext is None else str(ext)
    if "alerts" not in e:
        rec = Recommendation.from_record(e["recommendation"])
        only = AlertNote(str(e["key"]), str(e["kind"]), rec, legacy_labels(rec) if legacy else None)
        note = batch_notification([only], group, accepted, external_url)
        return Notification(str(e["key"]), note.kind, rec, group, accepted, note.alerts, external_url)
    members = []
    for a in e["alerts"]:
        rec = Recommendation.from_record(a["recommendation"])
        labels = legacy_labels(rec) if legacy else _labels(a.get("labels"))
        members.append(AlertNote(str(a["key"]), str(a["kind"]), rec, labels))
    note = batch_notification(members, group, accepted, external_url)
    return Notification(str(e["key"]), note.kind, note.recommendation, group, accepted, note.alerts, external_url)


# -- delivery ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """How one receiver's notifications are delivered (mapped from :class:`~advisor.notify.config.ReceiverConfig`)."""

    timeout_seconds: float = 10.0
    max_attempts: int | None = None
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 60.0
    rate_limit_per_minute: float | None = None
    retention_seconds: float = 86_400.0
    send_resolved: bool = True

    def backoff(self, attempts: int, rng: random.Random) -> float:
        """Delay after the ``attempts``-th failure: ``min(max, base × 2^(attempts−1))`` jittered to 50–100 %.

        With base 1 s and max 60 s: 0.5–1, 1–2, 2–4, 4–8, 8–16, 16–32, 30–60, 30–60 … seconds.
        """
        base = min(self.max_backoff_seconds, self.backoff_seconds * 2.0 ** min(max(attempts, 1) - 1, 62))
        return base * (0.5 + 0.5 * rng.random())


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """How one notification (one request's batch) settled: ``sent``, ``failed`` (rejected or out of
    attempts) or ``dropped`` (retention expired)."""

    key: str
    outcome: str
    attempts: int
    status_code: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ReceiverStats:
    """Counters since start-up, per alert transition (``resent``: further POSTs carrying one), the current
    backlog of alert transitions and the most recent results (newest last)."""

    receiver: str
    sent: int
    failed: int
    dropped: int
    queued: int
    last_error: str | None
    recent: tuple[DeliveryResult, ...] = field(default_factory=tuple)
    resent: int = 0


@dataclass(frozen=True, slots=True)
class _Attempt:
    status: int | None
    error: str | None
    retryable: bool
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class TokenBucket:
    """``per_minute`` tokens, refilled continuously at ``per_minute`` a minute (at least one token of burst)."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = max(1.0, per_minute)
        self.rate = per_minute / 60.0
        self.tokens = self.capacity
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = max(self.updated, now)

    def wait_time(self, now: float) -> float:
        """Seconds until a token is available (0 when one is)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        """Spend a token (call only when :meth:`wait_time` is 0)."""
        self._refill(now)
        self.tokens -= 1.0


def _retryable_status(status: int) -> bool:
    """5xx, 408 and 429 are retried; any other status is the receiver's final word."""
    return status >= 500 or status in RETRYABLE_STATUS


def _redirect_error(status: int, target: str) -> str:
    """The error of a receiver that answered ``status`` (3xx) pointing at ``target`` (absolute): redirects are not
    followed, since a POST re-sent elsewhere would carry the receiver's credentials (headers, HMAC) to whatever host
    the answer names; the operator is told where it points (scheme, host and port only: the rest of a receiver URL
    is a secret, :func:`~advisor.redact.redact_secret_url`) and what to change."""
    return (
        f"HTTP {status}: the receiver redirects to {redact_secret_url(target)}, and redirects are not followed "
        "(they would carry this receiver's credentials to the host named): set the receiver's url to that address"
    )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value whatever the case of its name (a transport may give a plain dict)."""
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 86_400 else None


class OutboxWorker:
    """Delivers one receiver's outbox on its own thread (see the module docstring for the rules).

    ``clock`` gives unix seconds (acceptance, retention, backoff, the rate limit, Alertmanager's times);
    ``sleep``, when given, replaces the interruptible wait between attempts (tests pass a fake that advances a
    fake clock); ``rng`` draws the jitter; ``transport`` sends the requests (default: a
    :class:`~advisor.http_edge.RequestsTransport` over the worker's own session, redirects not followed).
    """

    def __init__(
        self,
        receiver: Receiver,
        outbox: Outbox,
        policy: DeliveryPolicy,
        on_event: EventCallback | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
        suppressed: Callable[[str, float], bool] | None = None,
        transport: Transport | None = None,
    ) -> None:
        install_urllib3_redaction()
        self.suppressed: Callable[[str, float], bool] = suppressed or (lambda _id, _now: False)
        self.receiver = receiver
        self.name = receiver.name
        self.outbox = outbox
        self.policy = policy
        self._on_event = on_event
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._secrets = tuple(receiver.secrets())
        self._session = requests.Session()
        self._transport: Transport = transport or RequestsTransport(self._session, allow_redirects=False)
        timeout = policy.timeout_seconds
        # one deadline, timeout_seconds, over the whole request; no single step may take longer either
        self._limits = EdgeLimits(timeout, timeout, ERROR_BODY_BYTES, deadline_seconds=timeout)
        self._cond = threading.Condition()
        self._stopping = False
        self._abandoned = False
        self._kicked = False
        self._head_ready_at = 0.0
        self._resend_retry_at = 0.0
        self._resend_failures = 0
        self._vouched_at = clock()  # a start-up vouches for the alerts restored, until the first cycle does
        self._vouch_gaps: deque[float] = deque(maxlen=2)
        self._save_failing = False
        now = clock()
        self._bucket = TokenBucket(policy.rate_limit_per_minute, now) if policy.rate_limit_per_minute else None
        self._sent = self._failed = self._dropped = self._resent = 0
        self._last_error: str | None = None
        self._recent: deque[DeliveryResult] = deque(maxlen=20)
        with self._cond:
            events = self._expire(now)
            if events:
                self._save(now)
            restored = self.outbox.waiting()
            # what it held at start-up, for the reconcile: the thread below delivers a restored opening at once
            self._restored_firing = self._firing()
        if restored:
            log.info("notify %s: %d notification(s) restored from the outbox", self.name, restored)
        self._emit([*events, ("queued", restored)])
        self._thread = threading.Thread(target=self._run, name=f"notify-{self.name}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"OutboxWorker(receiver={self.receiver!r}, queued={len(self.outbox)})"

    # -- API used by the notifier ------------------------------------------------------------------
    def submit(self, note: Notification) -> bool:
        """Accept a notification (persisted before this returns). Its alerts already waiting or delivered
        recently (same idempotency key) are left out; ``False`` when none is left (a repeat)."""
        with self._cond:
            seen = set(self.outbox.delivered)
            seen.update(m.key for e in self.outbox.pending for m in e.note.members)
            fresh = [m for m in note.members if m.key not in seen]
            if not fresh:
                log.debug("notify %s: %s already accepted; not queued again", self.name, note.key)
                return False
            fixed = [self._with_fired_labels(m) for m in fresh]
            if fixed != list(note.members):
                fresh = fixed
                note = batch_notification(fresh, note.group_key, note.accepted_at, note.external_url)
            self.outbox.pending.append(Entry(note))
            if self.receiver.resend_interval is not None:
                for m in fresh:
                    rec = m.recommendation
                    if m.kind == "resolved":
                        self.outbox.active.pop(rec.id, None)
                    else:
                        self.outbox.active[rec.id] = ActiveAlert(
                            rec, labels=None if m.labels is None else dict(m.labels)
                        )
            self._save(self._clock())
            depth = self.outbox.waiting()
            self._kicked = True
            self._cond.notify_all()
        self._emit([("queued", depth)])
        return True

    def _with_fired_labels(self, member: AlertNote) -> AlertNote:
        """``member`` with the label set its alert fired with, fixed from then on.

        Alertmanager identifies an alert by its label set, while an incident is re-rendered every evaluation (issue
        13): a resolution or re-send with other labels would be another alert, and the one that fired would stay
        firing until its ``endsAt``. An opening fixes the labels (:func:`~advisor.notify.payload.alert_labels`:
        nothing in them changes while the incident is open); a ``resolved`` member of an alert this receiver keeps
        active (Alertmanager) takes the labels stored with it — which, for an alert fired by a release before the
        labels were fixed, are that release's (:func:`~advisor.notify.payload.legacy_labels`). The recommendation
        itself (its current turn and words, in the annotations) is left as it is.
        """
        if member.labels is not None:
            return member
        fired = self.outbox.active.get(member.recommendation.id) if member.kind == "resolved" else None
        labels = fired.fired_labels() if fired is not None else alert_labels(member.recommendation)
        return replace(member, labels=labels)

    def refresh(self, rec: Recommendation) -> None:
        """Let the next Alertmanager keep-alive re-send carry ``rec``, the incident's current rendering (its turn
        and words, in the annotations); the alert keeps the labels it fired with and its re-send schedule.
        Nothing is sent now, nor written (every evaluation re-renders an incident; the file follows at the next
        keep-alive); a recommendation not active here is ignored."""
        with self._cond:
            a = self.outbox.active.get(rec.id)
            if a is None or rec.resolved_at is not None:
                return
            a.labels = a.fired_labels()
            a.recommendation = rec

    def vouch(self, now: float) -> None:
        """An evaluation cycle completed at ``now`` (unix seconds): the alerts active here are open as far as the
        advisor knows, and keep-alives may carry them on (see the module docstring). The cycle gap their ``endsAt``
        allows for is the shorter of the last two gaps between calls: a loop that runs slow for good widens it, a
        single stall that ended does not (Alertmanager keeps the latest ``endsAt`` it was sent)."""
        with self._cond:
            if now > self._vouched_at:
                self._vouch_gaps.append(now - self._vouched_at)
                self._vouched_at = now

    def _valid_until(self, interval: float) -> float:
        """``endsAt`` of a keep-alive: the last vouch + 4 × max(``interval``, the cycle gap) (caller holds the
        lock)."""
        return self._vouched_at + ENDS_AT_RESEND_FACTOR * max(interval, min(self._vouch_gaps, default=0.0))

    def keep_alive(self, recs: Sequence[Recommendation]) -> None:
        """Keep open recommendations alive that this receiver does not hold active — after a restart without
        ``outbox_dir``, the incidents the state file restored: each is re-sent at the next keep-alive, with the
        label set :func:`~advisor.notify.payload.alert_labels` gives (fixed for the incident's life). Only for
        receivers that re-send (Alertmanager); alerts already active keep their labels and schedule."""
        if self.receiver.resend_interval is None:
            return
        with self._cond:
            new = [r for r in recs if r.id not in self.outbox.active]
            for r in new:
                self.outbox.active[r.id] = ActiveAlert(r)
            if new:
                self._save(self._clock())
                self._kicked = True
                self._cond.notify_all()
        if new:
            log.info("notify %s: keeping %d open alert(s) alive that the outbox did not hold", self.name, len(new))

    def forget(self, rec: Recommendation) -> None:
        """Stop re-sending ``rec`` (resolved on a receiver that does not send resolved notifications)."""
        with self._cond:
            if self.outbox.active.pop(rec.id, None) is not None:
                self._save(self._clock())

    def _firing(self) -> dict[str, Recommendation]:
        """The alerts this outbox fired and holds now, by id: an opening (or another firing member) waiting, or an
        Alertmanager alert kept active. Call under ``self._cond``."""
        firing: dict[str, Recommendation] = {}
        for e in self.outbox.pending:
            for m in e.note.members:
                if m.kind != "resolved":
                    firing[m.recommendation.id] = m.recommendation
        for a in self.outbox.active.values():
            firing.setdefault(a.recommendation.id, a.recommendation)
        return firing

    def alert_ids(self) -> tuple[dict[str, Recommendation], set[str]]:
        """What this outbox says of each alert, for the start-up reconcile with the state file (issue 14):
        ``(firing, resolved)`` — the alerts it fired and still holds (an opening waiting, or an Alertmanager
        alert kept active), or held when it was restored, by id, and the ids whose resolution is waiting or was
        delivered (the delivered keys remembered, :func:`~advisor.notify.receivers.idempotency_key`).

        Held when restored too: the worker's thread delivers a restored opening at once, so by the time the
        daemon reconciles (after building every receiver) the opening may have left the queue, and an alert the
        state file never recorded got no ``resolved`` (1 of 4 runs of
        ``tests/reliability/test_crash_window.py::test_start_up_reconciles_an_outbox_the_state_file_disagrees_with``
        alone; ``tests/notify/test_outbox.py`` pins it)."""
        with self._cond:
            firing = self._firing()
            for rec_id, r in self._restored_firing.items():
                firing.setdefault(rec_id, r)
            resolved: set[str] = set()
            for e in self.outbox.pending:
                for m in e.note.members:
                    if m.kind == "resolved":
                        resolved.add(m.recommendation.id)
            for key in self.outbox.delivered:
                rec_id, sep, _ = key.rpartition(RESOLVED_KEY_PART)
                if sep and rec_id:
                    resolved.add(rec_id)
            return firing, resolved

    def adopt(self, other: Outbox) -> None:
        """Take over what ``other`` (the in-memory outbox of this receiver's previous worker, stopped: a reload
        without ``outbox_dir``) holds: its waiting notifications go first, in order, then anything accepted here;
        its active alerts and delivered keys join these (issue 14: a reload drops nothing)."""
        with self._cond:
            self.outbox.pending.extendleft(reversed(other.pending))
            for rec_id, a in other.active.items():
                self.outbox.active.setdefault(rec_id, a)
            known = set(self.outbox.delivered)
            self.outbox.delivered.extendleft(k for k in reversed(other.delivered) if k not in known)
            other.pending.clear()
            other.active.clear()
            self._head_ready_at = 0.0
            self._save(self._clock())
            depth = self.outbox.waiting()
            self._kicked = True
            self._cond.notify_all()
        if depth:
            log.info("notify %s: %d notification(s) carried over from the previous configuration", self.name, depth)
        self._emit([("queued", depth)])

    def discard(self, why: str) -> int:
        """Drop what is waiting (an in-memory outbox whose worker stops for good: shutdown, or a reload removed
        the receiver); each alert transition counts ``dropped`` and the log says how many and ``why``. Returns
        how many were dropped. Call after :meth:`request_stop`."""
        with self._cond:
            n = self.outbox.waiting()
            self._dropped += n
            self.outbox.pending.clear()
            if n:
                self._last_error = f"dropped: {why}"
            self._cond.notify_all()
        if n:
            log.error("notify %s: %d notification(s) dropped: %s", self.name, n, why)
        self._emit([(c.NOTIFY_DROPPED, 0)] * n)
        return n

    def queued(self) -> int:
        """Alert transitions waiting."""
        with self._cond:
            return self.outbox.waiting()

    def stats(self) -> ReceiverStats:
        """A consistent snapshot of the counters."""
        with self._cond:
            return ReceiverStats(
                self.name,
                self._sent,
                self._failed,
                self._dropped,
                self.outbox.waiting(),
                self._last_error,
                tuple(self._recent),
                self._resent,
            )

    def flush(self, timeout: float) -> bool:
        """Wait until nothing is waiting; ``False`` if ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.outbox.pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(remaining, 0.5))
            return True

    def request_stop(self) -> None:
        """Ask the thread to stop after the request in flight (if any); what is waiting stays in the outbox."""
        with self._cond:
            self._stopping = True
            self._kicked = True
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait for the thread; if it is still in a request after ``timeout``, abandon it: it will not write
        the outbox again (its notification stays there and is sent after a restart)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._cond:
                self._abandoned = True
            log.warning("notify %s: a request to %s is still in flight; abandoned", self.name, self.receiver.safe_url)
            return False
        self._session.close()
        return True

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                if not self._step():
                    return
            except Exception as exc:  # the worker must never die: say what (scrubbed) and go on
                log.error(
                    "notify %s: unexpected %s in the delivery loop: %s",
                    self.name,
                    type(exc).__name__,
                    self._scrub(str(exc)),
                )
                self._pause(1.0)

    def _step(self) -> bool:
        """Decide under the lock, then send or wait outside it. ``False`` to stop."""
        entry: Entry | None = None
        resend: list[ActiveAlert] | None = None
        wait: float | None = None
        with self._cond:
            if self._stopping:
                return False
            now = self._clock()
            events = self._expire(now)
            if events:
                self._save(now)
            pending = self.outbox.pending
            if pending:
                head = pending[0]
                wait = max(self._head_ready_at - now, self._bucket.wait_time(now) if self._bucket else 0.0)
                if wait > 0:
                    expires_in = head.note.accepted_at + self.policy.retention_seconds - now
                    wait = max(0.0, min(wait, expires_in))
                else:
                    if self._bucket is not None:
                        self._bucket.take(now)
                    entry = head
            elif self.receiver.resend_interval is not None and self.outbox.active:
                interval = self.receiver.resend_interval
                # snoozed or acknowledged recommendations are not re-sent: Alertmanager lets them expire
                live = [a for a in self.outbox.active.values() if not self.suppressed(a.recommendation.id, now)]
                if not live:
                    wait = interval  # look again later: a snooze may end
                else:
                    due = min(now if a.last_sent_at is None else a.last_sent_at + interval for a in live)
                    due = max(due, self._resend_retry_at)
                    if due <= now:
                        resend = [ActiveAlert(a.recommendation, a.last_sent_at, a.fired_labels()) for a in live]
                    else:
                        wait = due - now
        self._emit(events)
        if entry is not None:
            self._deliver(entry)
        elif resend is not None:
            self._resend(resend)
        else:
            self._pause(wait)
        return True

    def _pause(self, seconds: float | None) -> None:
        if seconds is not None and self._sleep is not None:
            if seconds > 0:
                self._sleep(seconds)
            return
        with self._cond:
            if not self._kicked and not self._stopping:
                self._cond.wait(seconds)
            self._kicked = False

    def _expire(self, now: float) -> list[tuple[str, int]]:
        """Drop notifications older than the retention (caller holds the lock and saves)."""
        retention = self.policy.retention_seconds
        pending = self.outbox.pending
        expired = [e for e in pending if now - e.note.accepted_at >= retention]
        if not expired:
            return []
        head = pending[0]
        self.outbox.pending = deque(e for e in pending if now - e.note.accepted_at < retention)
        if not self.outbox.pending or self.outbox.pending[0] is not head:
            self._head_ready_at = 0.0
        events = []
        for e in expired:
            self._dropped += len(e.note.members)
            error = f"not delivered within the retention of {retention:g}s (last error: {e.last_error or 'none'})"
            self._last_error = error
            self._recent.append(DeliveryResult(e.note.key, "dropped", e.attempts, None, error))
            log.error(
                "notify %s: dropped %s (%s %s) after %d attempt(s): %s",
                self.name,
                e.note.key,
                e.note.kind,
                e.note.group_key,
                e.attempts,
                error,
            )
            depth = self.outbox.waiting()
            events += [(c.NOTIFY_DROPPED, depth)] * len(e.note.members)
        self._cond.notify_all()
        return events

    def _deliver(self, entry: Entry) -> None:
        note = entry.note
        try:
            request = self.receiver.build_request(note, self._clock())
        except Exception as exc:  # a body that cannot be built will never be: fail it, do not loop
            error = self._scrub(f"cannot build the request: {type(exc).__name__}: {exc}")
            attempt = _Attempt(None, error, retryable=False)
        else:
            attempt = self._post(request)
        events: list[tuple[str, int]] = []
        with self._cond:
            if self._abandoned:
                return
            now = self._clock()
            pending = self.outbox.pending
            if not pending or pending[0] is not entry:  # expired meanwhile (cannot happen: only we expire)
                self._cond.notify_all()
                return
            entry.attempts += 1
            members = note.members
            if entry.attempts > 1:  # a retry: the same alerts, ids and keys POSTed again
                self._resent += len(members)
                events += [(c.NOTIFY_RESENT, self.outbox.waiting())] * len(members)
            if attempt.ok:
                pending.popleft()
                for m in members:
                    self.outbox.delivered.append(m.key)
                    active = self.outbox.active.get(m.recommendation.id)
                    if active is not None and m.kind != "resolved":
                        active.last_sent_at = now
                self._save(now)
                self._head_ready_at = 0.0
                self._sent += len(members)
                self._recent.append(DeliveryResult(note.key, "sent", entry.attempts, attempt.status, None))
                events += [(c.NOTIFY_SENT, self.outbox.waiting())] * len(members)
                log.info(
                    "notify %s: delivered %s %s to %s (attempt %d)",
                    self.name,
                    note.kind,
                    note.key,
                    self.receiver.safe_url,
                    entry.attempts,
                )
            else:
                entry.last_error = attempt.error
                out_of_attempts = self.policy.max_attempts is not None and entry.attempts >= self.policy.max_attempts
                if not attempt.retryable or out_of_attempts:
                    pending.popleft()
                    self._save(now)
                    self._head_ready_at = 0.0
                    self._failed += len(members)
                    self._last_error = attempt.error
                    self._recent.append(
                        DeliveryResult(note.key, "failed", entry.attempts, attempt.status, attempt.error)
                    )
                    events += [(c.NOTIFY_FAILED, self.outbox.waiting())] * len(members)
                    why = "not retrying" if not attempt.retryable else f"giving up after {entry.attempts} attempts"
                    log.error(
                        "notify %s: %s rejected %s (%s); %s",
                        self.name,
                        self.receiver.safe_url,
                        note.key,
                        attempt.error,
                        why,
                    )
                else:
                    delay = self.policy.backoff(entry.attempts, self._rng)
                    if attempt.retry_after is not None:
                        delay = max(delay, min(attempt.retry_after, self.policy.max_backoff_seconds))
                    self._head_ready_at = now + delay
                    self._save(now)
                    log.warning(
                        "notify %s: attempt %d of %s to %s failed (%s); retrying in %.2fs",
                        self.name,
                        entry.attempts,
                        note.key,
                        self.receiver.safe_url,
                        attempt.error,
                        delay,
                    )
            self._cond.notify_all()
        self._emit(events)

    def _resend(self, active: list[ActiveAlert]) -> None:
        """Re-send the active alerts (Alertmanager keep-alive) with the labels they fired with; each alert POSTed
        counts ``resent``."""
        now = self._clock()
        posted = 0
        recs = [a.recommendation for a in active]
        with self._cond:
            ends = self._valid_until(self.receiver.resend_interval or 60.0)
        try:
            request = self.receiver.build_resend(recs, now, [a.labels for a in active], ends)
        except Exception as exc:
            attempt = _Attempt(None, f"cannot build the request: {type(exc).__name__}", retryable=True)
        else:
            attempt = self._post(request)
            posted = len(recs)
        events: list[tuple[str, int]] = []
        with self._cond:
            if self._abandoned:
                return
            self._resent += posted
            events += [(c.NOTIFY_RESENT, self.outbox.waiting())] * posted
            if attempt.ok:
                for r in recs:
                    a = self.outbox.active.get(r.id)
                    if a is not None:
                        a.last_sent_at = now
                self._resend_failures = 0
                self._resend_retry_at = 0.0
                self._save(now)
                log.debug("notify %s: re-sent %d active alert(s)", self.name, len(recs))
            else:
                self._resend_failures += 1
                interval = self.receiver.resend_interval or 60.0
                delay = min(interval, self.policy.backoff(self._resend_failures, self._rng))
                self._resend_retry_at = self._clock() + delay
                log.warning(
                    "notify %s: re-sending %d active alert(s) to %s failed (%s); again in %.2fs",
                    self.name,
                    len(recs),
                    self.receiver.safe_url,
                    attempt.error,
                    delay,
                )
            self._cond.notify_all()
        self._emit(events)

    def _post(self, request: Request) -> _Attempt:
        """One POST through the edge; never raises. Error texts are scrubbed of secrets."""
        try:
            resp = self._transport.request(
                "POST",
                request.url,
                self._limits,
                headers=request.headers,
                data=request.body,
                error_body_bytes=ERROR_BODY_BYTES,
            )
        except EdgeError as exc:
            if exc.status is not None and 200 <= exc.status < 300:
                # acknowledged: only the body was too long or too slow, and it is not needed
                log.debug("notify %s: 2xx body not read (%s)", self.name, self._scrub(exc.message))
                return _Attempt(exc.status, None, retryable=False)
            error = self._scrub(f"{exc.reason}: {exc.message}")
            retryable = exc.status is None or _retryable_status(exc.status)
            return _Attempt(exc.status, error, retryable)
        except Exception as exc:  # a transport outside the edge's error classes: kept and retried, never lost
            return _Attempt(None, self._scrub(f"transport failed: {type(exc).__name__}"), retryable=True)
        status = resp.status
        if 200 <= status < 300:
            return _Attempt(status, None, retryable=False)
        raw = resp.body[:ERROR_BODY_BYTES]
        snippet = raw.decode("utf-8", errors="replace").strip()
        error = self._scrub(f"HTTP {status}: {snippet}" if snippet else f"HTTP {status}")
        location = _header(resp.headers, "Location")
        if 300 <= status < 400 and location:
            error = self._scrub(_redirect_error(status, urljoin(request.url, location.strip())))
        retry_after = _retry_after(_header(resp.headers, "Retry-After"))
        return _Attempt(status, error, _retryable_status(status), retry_after)

    # -- helpers -----------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _save(self, now: float) -> None:
        try:
            self.outbox.save(now)
        except StateError as exc:
            if not self._save_failing:
                log.error("notify %s: %s; delivering from memory until it can be written", self.name, exc)
            self._save_failing = True
        else:
            if self._save_failing:
                log.info("notify %s: outbox written again", self.name)
            self._save_failing = False

    def _emit(self, events: Iterable[tuple[str, int]]) -> None:
        if self._on_event is None:
            return
        for outcome, depth in events:
            try:
                self._on_event(self.name, outcome, depth)
            except Exception as exc:
                log.error("notify %s: the metrics callback raised %s", self.name, type(exc).__name__)
