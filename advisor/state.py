"""The state file: open recommendations survive a restart, so it neither re-fires nor forgets.

Format: JSON ``{"version": 1, "saved_at": <unix s>, "recommendations": [<Recommendation.as_dict()>, …]}``.
Written atomically (a temporary file in the same folder, fsync, then ``os.replace``), as
prometheus-client's ``write_to_textfile`` does, so a crash mid-write leaves the previous file intact.
A file of another version is a clear :class:`~advisor.errors.StateError`, never silently reinterpreted
(the VPA checkpoint rule).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from advisor.domain import Recommendation
from advisor.errors import StateError

STATE_VERSION = 1


def _rec_from_dict(d: dict[str, Any]) -> Recommendation:
    return Recommendation(
        id=str(d["id"]),
        deployment=str(d["deployment"]),
        rule=str(d["rule"]),
        dial=str(d["dial"]),
        action=str(d["action"]),
        current=d["current"],
        suggested=d["suggested"],
        flag=str(d["flag"]),
        severity=str(d["severity"]),
        confidence=float(d["confidence"]),
        summary=str(d["summary"]),
        description=str(d["description"]),
        runbook=str(d["runbook"]),
        opened_at=float(d["opened_at_seconds"]),
        predicted_effect=d["predicted_effect"],
        evidence=d["evidence"],
        rank=int(d.get("rank", 0)),
    )


def save_state(path: str | Path, recommendations: Sequence[Recommendation], now: float) -> None:
    """Atomically write the open recommendations to ``path``.

    Raises:
        StateError: the folder is not writable (the message names the path).
    """
    p = Path(path)
    body = json.dumps(
        {"version": STATE_VERSION, "saved_at": now, "recommendations": [r.as_dict() for r in recommendations]},
        indent=1,
        default=str,
    )
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        raise StateError(f"cannot write state file {str(p)!r}: {exc.strerror}") from None


def load_state(path: str | Path) -> list[Recommendation]:
    """Read the open recommendations from ``path``; an absent file is an empty state.

    Raises:
        StateError: unreadable, not JSON, or written by another state version.
    """
    p = Path(path)
    if not p.exists():
        return []
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StateError(f"cannot read state file {str(p)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise StateError(f"state file {str(p)!r} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or "version" not in data:
        raise StateError(f"state file {str(p)!r} has no version: not a capacity-advisor state file")
    if data["version"] != STATE_VERSION:
        raise StateError(
            f"state file {str(p)!r} is version {data['version']!r}; this advisor reads version {STATE_VERSION}. "
            "Move it aside to start fresh (open recommendations will be re-detected)."
        )
    try:
        return [_rec_from_dict(r) for r in data.get("recommendations", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"state file {str(p)!r} has a malformed recommendation: {exc!r}") from None
