"""HTTP servers (the standard library's :class:`~http.server.ThreadingHTTPServer`) that say nothing when a client
hangs up mid-answer and log anything else through :mod:`logging`, in the process's one log format.

``socketserver.BaseServer.handle_error`` prints ``Exception occurred during processing of request from …`` and
a traceback straight to ``sys.stderr`` (https://docs.python.org/3/library/socketserver.html#socketserver.BaseServer.handle_error).
A scraper that times out and closes its connection while the answer is written (``BrokenPipeError``,
``ConnectionResetError``, ``ConnectionAbortedError``: :data:`HANGUPS`) is routine, not an error of the server:
505 such tracebacks were seen from the demo's stand-in engines under load (issue 19). Those are dropped (logged at
debug); any other exception is logged at error with its traceback.
"""

from __future__ import annotations

import logging
import sys
from http.server import ThreadingHTTPServer
from typing import Any, Final

log = logging.getLogger(__name__)

HANGUPS: Final = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
"""The client went away: its end of the connection is closed or reset."""


class QuietHangupServer(ThreadingHTTPServer):
    """A :class:`ThreadingHTTPServer` whose :meth:`handle_error` drops :data:`HANGUPS` and logs the rest."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Called by ``socketserver`` inside the ``except`` of a request that raised: a hang-up at debug, anything
        else at error with its traceback (never on raw stderr)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, HANGUPS):
            log.debug("client %s hung up: %s", client_address, exc)
            return
        log.error("request from %s failed", client_address, exc_info=True)
