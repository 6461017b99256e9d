"""The daemon's run loop: APScheduler 3.x interval job, HTTP server, clean stop on SIGTERM/SIGINT.

A cycle that is still running when the next is due is not started twice (``max_instances=1``,
``coalesce=True``); a cycle that raises is logged and the loop goes on. On SIGTERM or SIGINT the
current cycle finishes, queued notifications are flushed, and the process exits 0.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry

from advisor.server import AdvisorHTTPServer, parse_listen
from advisor.service import Service

log = logging.getLogger(__name__)


def _safe_cycle(service: Service) -> None:
    try:
        service.run_once()
    except Exception:
        log.exception("evaluation cycle failed; the loop goes on")


def run_daemon(
    service: Service,
    registry: CollectorRegistry,
    listen: str,
    duration_seconds: float | None = None,
    on_listening: Callable[[str], None] | None = None,
    stop_event: threading.Event | None = None,
) -> int:
    """Serve and evaluate every ``scrape_interval`` until a signal, ``stop_event`` or ``duration_seconds``.

    ``on_listening(url)`` is called once the HTTP server is bound (the URL has the real port when
    ``listen`` asked for port 0). Returns the process exit code (0 on a clean stop).

    Raises:
        ValueError: ``listen`` is not ``HOST:PORT``.
        OSError: the address cannot be bound.
    """
    server = AdvisorHTTPServer(parse_listen(listen), service, registry)
    server.start_background()
    if on_listening is not None:
        on_listening(server.url())
    stop = stop_event or threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            log.warning("received %s again; exiting now without finishing the cycle", name)
            os._exit(128 + signum)
        log.info("received %s; stopping after the current cycle (send it again to force)", name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)

    scheduler = BackgroundScheduler(timezone=datetime.UTC)
    scheduler.add_job(
        _safe_cycle,
        "interval",
        args=[service],
        seconds=service.cfg.scrape_interval,
        next_run_time=datetime.datetime.now(datetime.UTC),
        max_instances=1,
        coalesce=True,
        id="cycle",
    )
    scheduler.start()
    try:
        stop.wait(duration_seconds)
    finally:
        scheduler.shutdown(wait=True)
        service.close()
        server.shutdown()
        server.server_close()
    return 0
