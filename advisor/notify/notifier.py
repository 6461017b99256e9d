"""The notifier: one :class:`~advisor.notify.outbox.OutboxWorker` per configured receiver behind one facade.

The service calls :meth:`Notifier.submit_cycle` once per evaluation cycle with that cycle's recommendation
transitions (``opened`` / ``resolved``); per receiver they become requests as Alertmanager would send them — a
webhook gets one body per group key (the alert labels its ``group_by`` names, default ``deployment``) holding
every alert of that group, Alertmanager's API one request for the whole cycle, Slack one message per transition
— and each receiver's worker delivers them on its own thread, in order, through a persisted outbox. ``close``
(at shutdown) flushes for at most :data:`SHUTDOWN_FLUSH_SECONDS`, then stops the workers; whatever is still
waiting stays in the outbox folder and is sent by the next advisor started on it (without a folder it is dropped,
counted and logged). One advisor at a time may use an outbox folder (an exclusive ``flock`` on
``<folder>/.lock``).

Metrics: ``metrics_callback(receiver, outcome, queued)`` once per alert transition — outcome ``sent``,
``failed`` or ``dropped`` when it settles (each transition exactly once), ``resent`` for every further POST
carrying it (a retry after a failed attempt, an Alertmanager keep-alive re-send: it keeps its id and
idempotency key) — count these as ``advisor_notifications_total{receiver,outcome}``; or ``queued`` when a
batch was accepted or a backlog restored. ``queued`` is always the receiver's waiting alert transitions (a
gauge).
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from advisor.domain import Recommendation
from advisor.errors import ConfigError, StateError
from advisor.notify.config import ReceiverConfig
from advisor.notify.outbox import (
    DeliveryPolicy,
    EventCallback,
    Outbox,
    OutboxWorker,
    ReceiverStats,
    outbox_file,
)
from advisor.notify.payload import Links, group_key, group_labels, with_links
from advisor.notify.receivers import (
    AlertmanagerReceiver,
    AlertNote,
    Receiver,
    SlackReceiver,
    WebhookReceiver,
    batch_notification,
    idempotency_key,
)

log = logging.getLogger(__name__)

MetricsCallback = EventCallback
"""``(receiver, outcome, queued)``; see the module docstring."""

SHUTDOWN_FLUSH_SECONDS = 10.0
"""How long a stop waits for receivers (issue 14): with a request in flight given 1 s more, it stays well below
systemd's ``TimeoutStopSec=30s`` of the shipped unit (deploy/systemd); what is left waits in the outbox."""

TRANSITION_KINDS = ("opened", "resolved")
UPDATED = "updated"
"""An incident re-rendered while open: never a notification of its own; Alertmanager's keep-alives carry it."""


class _FolderLock:
    """An exclusive, non-blocking ``flock`` on ``<folder>/.lock`` held while a notifier uses the folder (the
    kernel releases it if the process dies)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".lock"
        self._file: IO[str] | None = None
        try:
            f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        except OSError as exc:
            raise StateError(f"cannot open outbox lock {str(self.path)!r}: {exc.strerror}") from None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise StateError(
                f"outbox folder {str(folder)!r} is in use by another capacity-advisor (lock {str(self.path)!r})"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class Notifier:
    """Submits each transition to every receiver's outbox worker."""

    def __init__(
        self,
        workers: Sequence[OutboxWorker],
        clock: Callable[[], float] = time.time,
        lock: _FolderLock | None = None,
    ) -> None:
        self.workers = tuple(workers)
        self._clock = clock
        self._lock = lock
        self._closed = False

    def __repr__(self) -> str:
        return f"Notifier(receivers={[w.receiver for w in self.workers]!r})"

    @property
    def receivers(self) -> tuple[str, ...]:
        """Receiver names, in configuration order."""
        return tuple(w.name for w in self.workers)

    def submit(self, transition_kind: str, recommendation: Recommendation, links: Links | None = None) -> None:
        """Accept one transition for every receiver: :meth:`submit_cycle` with it alone.

        Raises:
            ValueError: ``transition_kind`` is not ``opened`` or ``resolved``.
        """
        self.submit_cycle([(transition_kind, recommendation)], links)

    def submit_cycle(
        self,
        transitions: Sequence[tuple[str, Recommendation]],
        links: Links | None = None,
        open_alerts: Sequence[Recommendation] | None = None,
    ) -> None:
        """Accept one evaluation cycle's transitions ``(kind, recommendation)`` for every receiver (persisted
        before this returns; delivery is asynchronous), batched per receiver as its ``batching`` says: one
        request per group key (webhook), one for the cycle (Alertmanager) or one per transition (Slack).

        ``links`` (default: the receivers' own) puts ``externalURL``/``generatorURL`` on the advisor and the
        runbook on the configured base; a ``critical`` recommendation below confidence
        :data:`~advisor.conventions.LOW_CONFIDENCE` is sent as ``warning`` either way. A ``resolved``
        transition skips receivers with ``send_resolved: false`` (an Alertmanager receiver then only stops
        re-sending the alert, which Alertmanager resolves when its ``endsAt`` passes).

        An ``updated`` transition (an open incident re-rendered: its current turn and words) sends nothing: an
        Alertmanager receiver's next keep-alive re-send carries it, under the labels the alert fired with.

        Every call, transitions or none, vouches for the alerts still active (:meth:`OutboxWorker.vouch`): call it
        once per evaluation cycle. Keep-alives count their ``endsAt`` from the last call, so alerts of an advisor
        whose cycles stop expire in Alertmanager, as Prometheus's do when its rule evaluation stops.
        ``open_alerts``, when given, is every recommendation open after the cycle (the lifecycle's open set): an
        Alertmanager receiver keeps each alive, adopting those it does not hold (:meth:`OutboxWorker.keep_alive`: after
        a restart without ``outbox_dir`` the incidents restored from the state file are still firing), as each
        Prometheus evaluation re-sends every active alert.

        Raises:
            ValueError: a kind is not ``opened``, ``resolved`` or ``updated`` (nothing is accepted then).
        """
        for kind, _ in transitions:
            if kind not in TRANSITION_KINDS and kind != UPDATED:
                raise ValueError(f"transition kind must be one of {(*TRANSITION_KINDS, UPDATED)}, got {kind!r}")
        now = self._clock()
        for w in self.workers:
            w.vouch(now)  # a cycle completed: Alertmanager keep-alives may carry its open alerts on
        links = links or Links()
        if not transitions:
            self._keep_alive(open_alerts, links)
            return
        for kind, rec in transitions:
            if kind == UPDATED:
                for w in self.workers:
                    w.refresh(with_links(rec, links))
        notes = [
            AlertNote(idempotency_key(kind, rec), kind, with_links(rec, links))
            for kind, rec in transitions
            if kind != UPDATED
        ]
        if not notes:
            return
        external_url = links.external_url or None
        for w in self.workers:
            if external_url is not None:
                w.receiver.external_url = external_url  # Alertmanager's keep-alive re-sends link there too
            wanted: list[AlertNote] = []
            for n in notes:
                if n.kind == "resolved" and not w.policy.send_resolved:
                    w.forget(n.recommendation)
                else:
                    wanted.append(n)
            for gk, members in _batches(w.receiver, wanted):
                w.submit(batch_notification(members, gk, now, external_url))
        self._keep_alive(open_alerts, links)

    def _keep_alive(self, open_alerts: Sequence[Recommendation] | None, links: Links) -> None:
        """Hand the open set to every worker, after the cycle's transitions (so an opening is queued first)."""
        if open_alerts:
            recs = [with_links(r, links) for r in open_alerts if r.resolved_at is None]
            for w in self.workers:
                w.keep_alive(recs)

    def alert_ids(self) -> tuple[dict[str, Recommendation], set[str]]:
        """Over every receiver's outbox: ``(firing, resolved)`` — the alerts fired and still held there (by id,
        those with no resolution waiting or delivered) and the ids resolved there (waiting or delivered); see
        :meth:`~advisor.notify.outbox.OutboxWorker.alert_ids`."""
        firing: dict[str, Recommendation] = {}
        resolved: set[str] = set()
        for w in self.workers:
            f, r = w.alert_ids()
            for rec_id, rec in f.items():
                firing.setdefault(rec_id, rec)
            resolved |= r
        return {k: v for k, v in firing.items() if k not in resolved}, resolved

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every receiver's backlog is delivered or settled; ``False`` if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        ok = True
        for w in self.workers:
            ok = w.flush(max(0.0, deadline - time.monotonic())) and ok
        return ok

    def close(self, timeout: float = SHUTDOWN_FLUSH_SECONDS, grace: float = 1.0) -> int:
        """Flush for up to ``timeout`` seconds, then stop the workers (a request in flight gets ``grace`` more
        seconds, then is abandoned). What is still waiting stays in the outbox file for the next start; an
        in-memory outbox (no ``outbox_dir``) drops it, counted ``dropped`` and logged with how many. Returns
        how many were dropped. Idempotent (0 after the first call)."""
        if self._closed:
            return 0
        self._closed = True
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        for w in self.workers:
            w.request_stop()
        joined_by = max(deadline, time.monotonic()) + grace  # one grace for all: N hung receivers cost it once
        for w in self.workers:
            w.join(max(0.0, joined_by - time.monotonic()))
        dropped = 0
        kept: dict[str, int] = {}
        for w in self.workers:
            if w.outbox.path is None:
                dropped += w.discard("stopped with no outbox_dir to keep it in")
            elif w.queued():
                kept[w.name] = w.queued()
        if kept:
            log.warning("notify: stopped with notifications waiting; kept in the outbox for the next start: %s", kept)
        if self._lock is not None:
            self._lock.release()
        return dropped

    def take_over(self, old: Notifier, grace: float = 0.2) -> int:
        """Reload without ``outbox_dir``: stop ``old``'s workers at once (no flush: a reload never waits on a
        receiver; a request in flight gets ``grace`` seconds, then is abandoned and sent again here) and move each
        receiver's in-memory queue, active alerts and delivered keys to this notifier's worker of the same name.
        A receiver the new configuration removed drops its queue, counted ``dropped``. Returns how many were
        dropped."""
        if old._closed:
            return 0
        old._closed = True
        for w in old.workers:
            w.request_stop()
        deadline = time.monotonic() + grace
        for w in old.workers:
            w.join(max(0.0, deadline - time.monotonic()))
        mine = {w.name: w for w in self.workers}
        dropped = 0
        for w in old.workers:
            heir = mine.get(w.name)
            if heir is not None:
                heir.adopt(w.outbox)
            else:
                dropped += w.discard("the reload removed the receiver")
        if old._lock is not None:
            old._lock.release()
        return dropped

    def stats(self) -> dict[str, ReceiverStats]:
        """Counters per receiver since start-up."""
        return {w.name: w.stats() for w in self.workers}


def _batches(receiver: Receiver, notes: Sequence[AlertNote]) -> list[tuple[str, list[AlertNote]]]:
    """``notes`` split into requests for ``receiver``, each with its group key, in first-seen order."""
    if receiver.batching == "none":
        return [(group_key(group_labels(n.recommendation, receiver.group_by, n.labels)), [n]) for n in notes]
    groups: dict[str, list[AlertNote]] = {}
    for n in notes:
        gk = (
            "{}:{}"
            if receiver.batching == "all"
            else group_key(group_labels(n.recommendation, receiver.group_by, n.labels))
        )
        groups.setdefault(gk, []).append(n)
    return list(groups.items())


def make_receiver(cfg: ReceiverConfig, base_dir: Path | None = None, external_url: str = "") -> Receiver:
    """The receiver a configuration describes, with its secrets read.

    Raises:
        ValueError: a secret file or variable is missing (the message names it, never the secret).
    """
    url = cfg.resolved_url(base_dir)
    bearer = cfg.resolved_bearer_token(base_dir)
    if cfg.type == "slack":
        return SlackReceiver(cfg.name, url, bearer, external_url, cfg.group_by)
    if cfg.type == "alertmanager":
        return AlertmanagerReceiver(cfg.name, url, cfg.resend_interval, bearer, external_url)
    hmac_secret = cfg.resolved_hmac_secret(base_dir)
    return WebhookReceiver(cfg.name, url, hmac_secret, bearer, external_url, cfg.group_by, cfg.resend_interval)


def delivery_policy(cfg: ReceiverConfig) -> DeliveryPolicy:
    """The outbox worker's parameters from a receiver's configuration."""
    return DeliveryPolicy(
        timeout_seconds=cfg.timeout_seconds,
        max_attempts=cfg.max_attempts,
        backoff_seconds=cfg.backoff_seconds,
        max_backoff_seconds=cfg.max_backoff_seconds,
        rate_limit_per_minute=cfg.rate_limit_per_minute,
        retention_seconds=cfg.retention,
        send_resolved=cfg.send_resolved,
    )


def build_notifier(
    receivers: list[ReceiverConfig],
    outbox_dir: Path | None,
    metrics_callback: MetricsCallback | None = None,
    *,
    base_dir: Path | None = None,
    external_url: str = "",
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] | None = None,
    rng: random.Random | None = None,
    suppressed: Callable[[str, float], bool] | None = None,
) -> Notifier:
    """One worker per receiver, each with an outbox file ``<outbox_dir>/<name>.outbox.json`` (in memory only
    when ``outbox_dir`` is ``None``: then nothing survives a restart).

    ``base_dir`` anchors relative ``*_file`` secrets; ``external_url`` (the advisor's own URL) fills
    ``generatorURL``; ``suppressed(rec_id, now)`` tells snoozed or acknowledged recommendations, whose
    Alertmanager re-sends stop; ``clock``, ``sleep`` and ``rng`` are for tests.

    Raises:
        ConfigError: a receiver's secret cannot be read (``receivers[i]`` with the reason).
        StateError: the folder cannot be created or locked, or an outbox file is unreadable or of another version.
    """
    problems: list[tuple[str, str]] = []
    built: list[tuple[ReceiverConfig, Receiver]] = []
    for i, cfg in enumerate(receivers):
        try:
            built.append((cfg, make_receiver(cfg, base_dir, external_url)))
        except ValueError as exc:
            problems.append((f"receivers[{i}]", str(exc)))
    if problems:
        raise ConfigError(problems)
    lock: _FolderLock | None = None
    if outbox_dir is not None:
        try:
            outbox_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create outbox folder {str(outbox_dir)!r}: {exc.strerror}") from None
        lock = _FolderLock(outbox_dir)
    workers: list[OutboxWorker] = []
    try:
        known = set()
        for cfg, receiver in built:
            path = outbox_file(outbox_dir, cfg.name) if outbox_dir is not None else None
            if path is not None:
                known.add(path.name)
            outbox = Outbox(cfg.name, path)
            policy = delivery_policy(cfg)
            workers.append(
                OutboxWorker(
                    receiver, outbox, policy, metrics_callback, clock=clock, sleep=sleep, rng=rng, suppressed=suppressed
                )
            )
        if outbox_dir is not None:
            for orphan in sorted(p.name for p in outbox_dir.glob("*.outbox.json") if p.name not in known):
                log.warning("notify: outbox %s belongs to no configured receiver; nothing in it is sent", orphan)
    except BaseException:
        for w in workers:
            w.request_stop()
        for w in workers:
            w.join(1.0)
        if lock is not None:
            lock.release()
        raise
    return Notifier(workers, clock, lock)
