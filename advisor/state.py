"""The state file: open recommendations survive a restart, so it neither re-fires nor forgets.

Format: JSON ``{"version": 1, "saved_at": <unix s>, "recommendations": [<Recommendation.as_dict()>, …],
"notifying": [{"kind": "opened"|"resolved", "recommendation": <Recommendation.to_record()>}, …]}``.
Written atomically (a temporary file in the same folder, fsync, then ``os.replace``), as
prometheus-client's ``write_to_textfile`` does, so a crash mid-write leaves the previous file intact.
A file of another version is a clear :class:`~advisor.errors.StateError`, never silently reinterpreted
(the VPA checkpoint rule).

Other modules keep their own state in further top-level keys (*sections*, e.g. ``"acks"`` for snoozes and
acknowledgements, :mod:`advisor.acks`) through :func:`load_section` and :func:`save_section`;
:func:`save_state` keeps them. Sections are optional and ignored by readers that do not know them, so
adding one does not change :data:`STATE_VERSION`; changing the shape of an existing key does.

**Crash consistency with the outbox (issue 14).** ``notifying`` is a write-ahead record of the transitions a cycle
hands to the notifier: the cycle writes the open set and those transitions in one atomic write *before* the
outbox accepts them, and clears ``notifying`` once every receiver's outbox holds them. A daemon killed between
the two writes restarts with the open set of after the transitions and re-submits ``notifying`` to the
notifier (:func:`load_notifying`); the outbox leaves out what it already holds (same idempotency keys: ids and
times come from the records), so nothing is lost, repeated under another key, or resolved twice. ``notifying`` is
optional: a file without it (written before issue 14) reads as none.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from advisor.domain import Recommendation
from advisor.errors import StateError
from advisor.files import read_text_capped

STATE_VERSION = 1

_RESERVED = frozenset({"version", "saved_at", "recommendations", "notifying"})
_WRITE_LOCK = threading.Lock()
"""Serialises read-modify-write of the state file between the loop and the HTTP API in one process."""


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, fsync, ``os.replace``.

    Raises:
        StateError: the folder is not writable (the message names the path).
    """
    p = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise StateError(f"cannot write state file {str(p)!r}: {exc.strerror}") from None


def _read_document(p: Path) -> dict[str, Any] | None:
    """The whole state document, version-checked; ``None`` when the file does not exist.

    Raises:
        StateError: unreadable, not JSON, or written by another state version.
    """
    if not p.exists():
        return None
    try:
        data = json.loads(read_text_capped(p))
    except OSError as exc:
        raise StateError(f"cannot read state file {str(p)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise StateError(f"state file {str(p)!r} is not JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError:
        raise StateError(f"state file {str(p)!r} is not UTF-8 text") from None
    except RecursionError:
        raise StateError(f"state file {str(p)!r} is nested too deeply to be a state file") from None
    if not isinstance(data, dict) or "version" not in data:
        raise StateError(f"state file {str(p)!r} has no version: not a capacity-advisor state file")
    if data["version"] != STATE_VERSION:
        raise StateError(
            f"state file {str(p)!r} is version {data['version']!r}; this advisor reads version {STATE_VERSION}. "
            "Move it aside to start fresh (open recommendations will be re-detected)."
        )
    return data


def _other_sections(p: Path) -> dict[str, Any]:
    """The sections besides the reserved keys, from the current file (none when it is absent or unusable:
    the recommendations are worth more than a snooze, so an unusable file never blocks saving them)."""
    try:
        data = _read_document(p)
    except StateError:
        return {}
    return {k: v for k, v in (data or {}).items() if k not in _RESERVED}


def save_state(
    path: str | Path,
    recommendations: Sequence[Recommendation],
    now: float,
    notifying: Sequence[tuple[str, Recommendation]] = (),
) -> None:
    """Atomically write the open recommendations to ``path``, keeping any other sections in it; ``notifying``:
    the transitions ``(kind, recommendation)`` about to be handed to the notifier (the module docstring), empty
    once the outbox holds them.

    Raises:
        StateError: the folder is not writable (the message names the path).
    """
    p = Path(path)
    with _WRITE_LOCK:
        doc: dict[str, Any] = {
            "version": STATE_VERSION,
            "saved_at": now,
            "recommendations": [r.as_dict() for r in recommendations],
        }
        if notifying:
            doc["notifying"] = [{"kind": k, "recommendation": r.to_record()} for k, r in notifying]
        doc.update(_other_sections(p))
        atomic_write_text(p, json.dumps(doc, indent=1, default=str))


def load_section(path: str | Path, key: str) -> Any:
    """The value of section ``key`` (``None`` when the file or the key is absent).

    Raises:
        StateError: unreadable, not JSON, or written by another state version.
        ValueError: ``key`` is one of the reserved keys.
    """
    if key in _RESERVED:
        raise ValueError(f"{key!r} is not a section")
    data = _read_document(Path(path))
    return None if data is None else data.get(key)


def save_section(path: str | Path, key: str, value: Any, now: float) -> None:
    """Atomically replace section ``key`` with ``value`` (JSON-ready), keeping everything else in the file.

    Raises:
        StateError: the file is unreadable or of another version (it is not overwritten), or the folder is
            not writable.
        ValueError: ``key`` is one of the reserved keys.
    """
    if key in _RESERVED:
        raise ValueError(f"{key!r} is not a section")
    p = Path(path)
    with _WRITE_LOCK:
        data = _read_document(p)
        doc: dict[str, Any] = data if data is not None else {"version": STATE_VERSION, "recommendations": []}
        doc["saved_at"] = now
        doc[key] = value
        atomic_write_text(p, json.dumps(doc, indent=1, default=str))


def load_state(path: str | Path) -> list[Recommendation]:
    """Read the open recommendations from ``path``; an absent file is an empty state.

    Raises:
        StateError: unreadable, not JSON, or written by another state version.
    """
    p = Path(path)
    data = _read_document(p)
    if data is None:
        return []
    try:
        return [Recommendation.from_record(r) for r in data.get("recommendations", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"state file {str(p)!r} has a malformed recommendation: {exc!r}") from None


def load_notifying(path: str | Path) -> list[tuple[str, Recommendation]]:
    """The transitions ``(kind, recommendation)`` a daemon was handing to the notifier when it stopped (empty when
    the last cycle finished, or the file is absent).

    Raises:
        StateError: unreadable, not JSON, of another state version, or a malformed entry.
    """
    p = Path(path)
    data = _read_document(p)
    if data is None:
        return []
    try:
        return [(str(e["kind"]), Recommendation.from_record(e["recommendation"])) for e in data.get("notifying", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"state file {str(p)!r} has a malformed notifying entry: {exc!r}") from None
