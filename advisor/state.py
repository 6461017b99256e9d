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
    """The whole state document, version-checked; ``None`` when the file does not exist or is empty (a file
    pre-created empty by config management blocked start-up with "not JSON", breaker 20).

    Raises:
        StateError: unreadable, not JSON (or a number in it too large to read), or written by another state version.
    """
    if not p.exists():
        return None
    aside = "; move it aside to start fresh (open recommendations will be re-detected)"
    try:
        text = read_text_capped(p).removeprefix("\ufeff")  # a BOM an editor added by hand is not corruption
        if not text.strip():  # created empty (config management, `touch`): nothing was ever written, nothing lost
            return None
        data = json.loads(text)
    except OSError as exc:
        raise StateError(f"cannot read state file {str(p)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        what = (
            "only NUL bytes (a write cut short)"
            if not text.strip("\0")
            else f"not JSON ({exc.msg} at line {exc.lineno})"
        )
        raise StateError(f"state file {str(p)!r} is {what}{aside}") from None
    except UnicodeDecodeError:
        raise StateError(f"state file {str(p)!r} is not UTF-8 text{aside}") from None
    except RecursionError:
        raise StateError(f"state file {str(p)!r} is nested too deeply to be a state file{aside}") from None
    except ValueError:  # json's other refusal: an integer past Python's 4,300-digit conversion limit
        raise StateError(
            f"state file {str(p)!r} is not valid JSON: it holds a number too large to read{aside}"
        ) from None
    if not isinstance(data, dict) or "version" not in data:
        raise StateError(f"state file {str(p)!r} has no version: not a capacity-advisor state file{aside}")
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
        StateError: unreadable, not JSON, written by another state version, or a malformed recommendation; the
            message names the file, the entry (1-based, with its id when it has one) and the field in plain words
            (``state file '/x/state.json': malformed recommendation 3 (id 'abc'): missing field 'opened_at'``).
    """
    p = Path(path)
    data = _read_document(p)
    if data is None:
        return []
    where = f"state file {str(p)!r}"
    return [
        _recommendation(r, f"{where}: malformed recommendation {i}")
        for i, r in _entries(data, "recommendations", where)
    ]


def load_notifying(path: str | Path) -> list[tuple[str, Recommendation]]:
    """The transitions ``(kind, recommendation)`` a daemon was handing to the notifier when it stopped (empty when
    the last cycle finished, or the file is absent).

    Raises:
        StateError: unreadable, not JSON, of another state version, or a malformed entry; the message names the
            file, the entry (1-based) and the field in plain words.
    """
    p = Path(path)
    data = _read_document(p)
    if data is None:
        return []
    out: list[tuple[str, Recommendation]] = []
    for i, entry in _entries(data, "notifying", f"state file {str(p)!r}"):
        here = f"state file {str(p)!r}: malformed notifying entry {i}"
        if not isinstance(entry, dict):
            raise StateError(f"{here}: not a JSON object but {_kind(entry)}")
        for key in ("kind", "recommendation"):
            if key not in entry:
                raise StateError(f"{here}: missing field {key!r}")
        out.append((str(entry["kind"]), _recommendation(entry["recommendation"], f"{here}: recommendation")))
    return out


def _entries(data: dict[str, Any], key: str, where: str) -> list[tuple[int, Any]]:
    """The entries of list ``key`` (absent: none), numbered from 1.

    Raises:
        StateError: ``key`` holds something other than a list (the message names it and ``where``).
    """
    if key not in data:
        return []
    value = data[key]
    if not isinstance(value, list):
        raise StateError(f"{where}: {key!r} must be a list, not {_kind(value)}")
    return list(enumerate(value, start=1))


_REQUIRED_FIELDS = (
    *("id", "deployment", "rule", "dial", "action", "current", "suggested", "flag", "severity", "confidence"),
    *("summary", "description", "runbook", "predicted_effect", "evidence"),
)
"""Fields :meth:`Recommendation.from_record` reads without a default (besides the opening time)."""
_NUMBER_FIELDS = ("confidence", "opened_at_seconds", "opened_at", "resolved_at", "updated_at_seconds", "updated_at")
_OBJECT_FIELDS = ("predicted_effect", "evidence")
_LIST_OF_OBJECT_FIELDS = ("alternatives", "withheld")


def _recommendation(record: Any, where: str) -> Recommendation:
    """``record`` read by :meth:`Recommendation.from_record`, its shape checked first so that a fault is told in
    plain words, naming ``where`` (the file and the entry) and the field.

    Raises:
        StateError: not an object, a field missing, or a field of the wrong type or out of range.
    """
    if not isinstance(record, dict):
        raise StateError(f"{where}: not a JSON object but {_kind(record)}")
    rec_id = record.get("id")
    if isinstance(rec_id, str) and rec_id:
        where = f"{where} (id {rec_id!r})"
    problem = _record_problem(record)
    if problem is None:
        try:
            return Recommendation.from_record(record)
        except KeyError as exc:
            problem = f"missing field {str(exc.args[0]) if exc.args else '?'!r}"
        except (TypeError, ValueError, OverflowError) as exc:  # what the checks above do not foresee, in words
            problem = str(exc)
    raise StateError(f"{where}: {problem}")


def _record_problem(record: dict[str, Any]) -> str | None:
    """What makes ``record`` no recommendation record (:meth:`Recommendation.as_dict` or ``to_record``'s form), in
    plain words naming the field; None when its shape is right."""
    for key in _REQUIRED_FIELDS:
        if key not in record:
            return f"missing field {key!r}"
    as_dict_form = "opened_at_seconds" in record  # opened_at, resolved_at: RFC 3339 copies there, not read
    opened = "opened_at_seconds" if as_dict_form else "opened_at"
    if opened not in record:
        return "missing field 'opened_at'"
    for key in _NUMBER_FIELDS:
        if (key in ("opened_at", "resolved_at") and as_dict_form) or f"{key}_seconds" in record:
            continue
        value = record.get(key)
        if value is None and key not in ("confidence", opened):
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"field {key!r} must be a number, got {_shown(value)}"
        try:
            float(value)
        except OverflowError:
            return f"field {key!r} must be a number, got one too large ({len(str(abs(int(value)))):,} digits)"
    for key in _OBJECT_FIELDS:
        if not isinstance(record[key], dict):
            return f"field {key!r} must be a JSON object, got {_shown(record[key])}"
    for key in _LIST_OF_OBJECT_FIELDS:
        value = record.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, dict) for v in value)):
            return f"field {key!r} must be a list of JSON objects, got {_shown(value)}"
    rank = record.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
        return f"field 'rank' must be an integer, got {_shown(rank)}"
    return None


def _kind(value: Any) -> str:
    """What a JSON value is, in words (``a string``, ``a list`` …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a JSON object" if isinstance(value, dict) else "another value"


def _shown(value: Any) -> str:
    """``value`` as JSON, cut to 60 characters."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
