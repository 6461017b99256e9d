"""Log formats: ``--log-format text`` (the default) writes one line per record, ``--log-format json`` one JSON
object per line.

Text lines escape every control character of the message and its interpolated values
(:func:`advisor.redact.escape_controls`): model labels, target errors and error bodies come from outside and
must not forge a log line (``a"b\nc``) or drive the terminal. JSON lines are escaped by ``json.dumps``.

Fields: ``ts`` (RFC 3339), ``level``, ``logger``, ``msg``, plus ``deployment``/``target`` when a log call
passes them (``log.info(..., extra={"deployment": d, "target": t})``) or when the message carries
``deployment=… target=…`` pairs (the advisor's own convention), and ``exc`` with the traceback.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
from types import TracebackType
from typing import TypeAlias

from advisor.redact import escape_controls

_ExcInfo: TypeAlias = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The text log line: time, level, logger, message."""
_PAIRS = re.compile(r"\b(deployment|target|receiver|prometheus)=(\S+)")


class TextFormatter(logging.Formatter):
    """Formats a record as one line of :data:`TEXT_FORMAT`, control characters in the message (and so in every
    interpolated value) escaped as ``\\n``, ``\\x1b``…; a traceback, when there is one, follows on its own lines,
    with the message of each exception in it escaped the same way (an exception may quote a page or a body)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging.Formatter's name
        """The line with ``record.message`` (set by :meth:`logging.Formatter.format`) escaped."""
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: _ExcInfo) -> str:  # noqa: N802 - logging.Formatter's name
        """The traceback, each chained exception's text with its control characters escaped: a message such as
        ``"bad page: x\\n2026-01-01 00:00:00,000 ERROR advisor: forged"`` stays on its ``ValueError:`` line."""
        text = super().formatException(ei)
        seen: set[int] = set()
        exc = ei[1]
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            told = str(exc)
            if told and escape_controls(told) != told:
                text = text.replace(told, escape_controls(told))
            exc = exc.__cause__ or exc.__context__
        return text


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
