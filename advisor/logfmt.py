"""Structured logs: ``--log-format json`` writes one JSON object per line.

Fields: ``ts`` (RFC 3339), ``level``, ``logger``, ``msg``, plus ``deployment``/``target`` when a log call
passes them (``log.info(..., extra={"deployment": d, "target": t})``) or when the message carries
``deployment=… target=…`` pairs (the advisor's own convention), and ``exc`` with the traceback.
"""

from __future__ import annotations

import datetime
import json
import logging
import re

_PAIRS = re.compile(r"\b(deployment|target|receiver|prometheus)=(\S+)")


class JSONFormatter(logging.Formatter):
    """Formats a record as one JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as JSON (never raises on odd arguments: falls back to the raw message)."""
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        out: dict[str, object] = {
            "ts": datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": msg,
        }
        for key, value in _PAIRS.findall(msg):
            out.setdefault(key, value)
        for key in ("deployment", "target", "receiver"):
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
