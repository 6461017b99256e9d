"""Snoozes and acknowledgements of open recommendations, kept in the state file.

An operator who knows about a recommendation can *snooze* it (for a duration) or *acknowledge* it
(until it resolves). Either way it stays open — in ``/api/v1/recommendations``, the status page and
``/metrics`` — but the notifiers stop repeating it: :meth:`AckStore.suppressed` tells the loop which ids
to skip. A recommendation's id includes its opening time, so when it resolves and later opens again the
new one notifies as usual.

Persistence goes through :func:`advisor.state.save_section` (section ``"acks"`` of the state file, written
atomically beside the open recommendations); without a state file the store lives in memory only.

Shape of the section::

    {"<recommendation id>": {"kind": "snooze" | "ack", "reason": str, "created_at": unix s,
                             "until": unix s | null, "by": str | null, "deployment": str}, …}
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.domain import rfc3339
from advisor.errors import StateError
from advisor.state import load_section, save_section

log = logging.getLogger(__name__)

SECTION = "acks"
KINDS = ("snooze", "ack")


@dataclass(frozen=True, slots=True)
class Ack:
    """One snooze (``until`` set) or acknowledgement (``until`` None: until the recommendation resolves)."""

    id: str
    kind: str
    reason: str
    created_at: float
    until: float | None = None
    by: str | None = None
    deployment: str = ""

    def active(self, now: float) -> bool:
        """Whether it still silences notifications at ``now``."""
        return self.until is None or now < self.until

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (times as unix seconds and RFC 3339)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "reason": self.reason,
            "created_at": rfc3339(self.created_at),
            "created_at_seconds": self.created_at,
            "until": None if self.until is None else rfc3339(self.until),
            "until_seconds": self.until,
            "by": self.by,
            "deployment": self.deployment,
        }

    def to_state(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "created_at": self.created_at,
            "until": self.until,
            "by": self.by,
            "deployment": self.deployment,
        }

    @staticmethod
    def from_state(rec_id: str, d: Mapping[str, Any]) -> Ack:
        kind = str(d["kind"])
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r}")
        until = d.get("until")
        return Ack(
            id=rec_id,
            kind=kind,
            reason=str(d.get("reason", "")),
            created_at=float(d["created_at"]),
            until=None if until is None else float(until),
            by=None if d.get("by") is None else str(d["by"]),
            deployment=str(d.get("deployment", "")),
        )


class AckStore:
    """Thread-safe snoozes and acknowledgements by recommendation id, persisted in the state file.

    Args:
        path: the state file (``None``: memory only).
        clock: unix seconds (tests pass a fake).

    Raises:
        StateError: the state file is unreadable, of another version, or its ``acks`` section is malformed.
    """

    def __init__(self, path: str | Path | None, clock: Callable[[], float] = time.time) -> None:
        self.path = None if path is None else Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._acks: dict[str, Ack] = {}
        if self.path is not None:
            raw = load_section(self.path, SECTION)
            if raw is not None:
                if not isinstance(raw, dict):
                    raise StateError(f"state file {str(self.path)!r}: section {SECTION!r} must be an object")
                for rec_id, d in raw.items():
                    try:
                        self._acks[str(rec_id)] = Ack.from_state(str(rec_id), d)
                    except (KeyError, TypeError, ValueError) as exc:
                        raise StateError(
                            f"state file {str(self.path)!r}: malformed {SECTION} entry {rec_id!r}: {exc}"
                        ) from None

    # -- queries -----------------------------------------------------------------------------------
    def get(self, rec_id: str, now: float | None = None) -> Ack | None:
        """The active snooze or acknowledgement of ``rec_id`` (``None`` when none, or the snooze ended)."""
        t = self.clock() if now is None else now
        with self._lock:
            a = self._acks.get(rec_id)
        return a if a is not None and a.active(t) else None

    def suppressed(self, rec_id: str, now: float | None = None) -> bool:
        """Whether notifications about ``rec_id`` are silenced at ``now`` (snoozed or acknowledged)."""
        return self.get(rec_id, now) is not None

    def all(self) -> list[Ack]:
        """Every stored entry, expired snoozes included (until pruned)."""
        with self._lock:
            return list(self._acks.values())

    # -- writes ------------------------------------------------------------------------------------
    def snooze(self, rec_id: str, seconds: float, reason: str, deployment: str = "", by: str | None = None) -> Ack:
        """Silence ``rec_id`` for ``seconds`` from now (replaces an earlier snooze or acknowledgement).

        Raises:
            ValueError: ``seconds`` is not positive.
            StateError: the state file cannot be written (the entry is not kept then).
        """
        if not seconds > 0:
            raise ValueError(f"snooze duration must be positive, got {seconds!r}")
        now = self.clock()
        return self._put(Ack(rec_id, "snooze", reason, now, now + seconds, by, deployment))

    def ack(self, rec_id: str, reason: str, deployment: str = "", by: str | None = None) -> Ack:
        """Silence ``rec_id`` until it resolves.

        Raises:
            StateError: the state file cannot be written (the entry is not kept then).
        """
        return self._put(Ack(rec_id, "ack", reason, self.clock(), None, by, deployment))

    def prune(self, open_ids: Iterable[str]) -> int:
        """Forget entries of recommendations no longer open and snoozes that ended; returns how many.

        Raises:
            StateError: the state file cannot be written.
        """
        keep = set(open_ids)
        now = self.clock()
        with self._lock:
            gone = [k for k, a in self._acks.items() if k not in keep or not a.active(now)]
            if not gone:
                return 0
            before = dict(self._acks)
            for k in gone:
                del self._acks[k]
            try:
                self._save(now)
            except StateError:
                self._acks = before
                raise
        return len(gone)

    def _put(self, a: Ack) -> Ack:
        with self._lock:
            before = self._acks.get(a.id)
            self._acks[a.id] = a
            try:
                self._save(a.created_at)
            except StateError:
                if before is None:
                    del self._acks[a.id]
                else:
                    self._acks[a.id] = before
                raise
        log.info(
            "recommendation %s %s%s: %r",
            a.id,
            "snoozed" if a.kind == "snooze" else "acknowledged",
            "" if a.until is None else f" until {rfc3339(a.until)}",
            a.reason,
        )
        return a

    def _save(self, now: float) -> None:
        """Write the section (the caller holds the lock)."""
        if self.path is None:
            return
        save_section(self.path, SECTION, {k: a.to_state() for k, a in self._acks.items()}, now)
