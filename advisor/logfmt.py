"""Log formats: ``--log-format text`` (the default) writes one line per record, ``--log-format json`` one JSON
object per line.

Text lines escape every control character of the message and its interpolated values
(:func:`advisor.redact.escape_controls`): model labels, target errors and error bodies come from outside and
must not forge a log line (``a"b\nc``) or drive the terminal. JSON lines are escaped by ``json.dumps``.

Fields: ``ts`` (RFC 3339), ``level``, ``logger``, ``msg``, plus ``deployment``/``target`` when a log call
passes them (``log.info(..., extra={"deployment": d, "target": t})``) or when the message carries
``deployment=… target=…`` pairs (the advisor's own convention), and ``exc`` with the traceback.

``--compact`` (text only): each record is one line under :data:`COMPACT_WIDTH` characters — the message cut with
``…`` (:func:`fit`) and a traceback reduced to its last exception's ``Type: message``.

The handler (:class:`StderrHandler`) writes to whatever ``sys.stderr`` is when a record is emitted, not the stream
of when logging was configured: a test harness that swaps and closes ``sys.stderr`` (pytest's capture) leaves no
handler writing to a closed file ("--- Logging error --- … I/O operation on closed file").
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import sys
from types import TracebackType
from typing import TypeAlias

from advisor.redact import escape_controls

_ExcInfo: TypeAlias = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The text log line: time, level, logger, message."""
_PAIRS = re.compile(r"\b(deployment|target|receiver|prometheus)=(\S+)")

COMPACT_WIDTH = 160
"""``--compact``: every console line is shorter than this many characters (issue 19: "under 160")."""


def fit(line: str, width: int = COMPACT_WIDTH) -> str:
    """``line`` when shorter than ``width`` characters, else its first ``width - 2`` characters and ``…`` (so
    ``width - 1`` in all). Raises ValueError for a ``width`` under 2."""
    if width < 2:
        raise ValueError(f"width must be at least 2 characters, got {width}")
    return line if len(line) < width else line[: width - 2] + "…"


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A :class:`logging.StreamHandler` on the ``sys.stderr`` of each emit, as CPython's own last-resort handler
    (``logging._StderrHandler``, https://docs.python.org/3/library/logging.html#logging.lastResort): a handler
    configured under one ``sys.stderr`` (pytest's captured stream, closed after the test) never writes to it once
    it has been replaced."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> object:
        """The current ``sys.stderr``."""
        return sys.stderr


class TextFormatter(logging.Formatter):
    """Formats a record as one line of :data:`TEXT_FORMAT`, control characters in the message (and so in every
    interpolated value) escaped as ``\\n``, ``\\x1b``…; a traceback, when there is one, follows on its own lines,
    with the message of each exception in it escaped the same way (an exception may quote a page or a body)."""

    def __init__(self, compact: bool = False) -> None:
        super().__init__(TEXT_FORMAT)
        self.compact = compact

    def format(self, record: logging.LogRecord) -> str:
        """The line (and traceback); with ``compact``, one line under :data:`COMPACT_WIDTH` characters, an exception
        as `` (Type: message)`` at its end."""
        if not self.compact:
            return super().format(record)
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            line += f" ({type(exc).__name__}: {escape_controls(str(exc))})"
        return fit(line)

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
            # the sentence's punctuation is not the value's: "deployment=chat-8b: …" names chat-8b (no deployment name
            # or URL ends in ':', ',' or ';'; a fresh user's log join on deployment="…" matched nothing)
            out.setdefault(key, value.rstrip(":,;"))
        for key in ("deployment", "target", "receiver"):
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
