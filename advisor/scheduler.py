"""The daemon's run loop: APScheduler 3.x interval job, HTTP server, clean stop on SIGTERM/SIGINT.

A cycle that is still running when the next is due is not started twice (``max_instances=1``,
``coalesce=True``) and the skipped one is counted (``advisor_cycles_skipped_total``); when the long cycle ends it
is logged as one warning, ``cycle took 7.2 s > scrape_interval 5 s; skipped 1``, in place of APScheduler's own
"maximum number of running instances reached" and "was missed by" warnings (filtered out:
:class:`_SkipNoticeFilter`); its length is exported as ``advisor_cycle_duration_seconds``
(:meth:`advisor.service.Service.run_once`). A cycle that raises is logged and the loop goes on.
A cycle waits for its scrapes at most half an interval (:meth:`advisor.service.Service.run_cycle`): a slow or
hung target's scrape runs on and is consumed by a later cycle. On SIGTERM or SIGINT the current cycle finishes,
queued notifications are flushed for at most 10 s (:data:`advisor.notify.notifier.SHUTDOWN_FLUSH_SECONDS`; the
rest waits in the outbox), a last line says ``stopped (SIGTERM) after N cycle(s)``, and the process exits 0.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry

from advisor.heap import CycleHeap
from advisor.server import DEFAULT_MAX_CONNECTIONS, AdvisorHTTPServer, parse_listen, raise_fd_limit
from advisor.service import Service

log = logging.getLogger(__name__)


class _SkipNoticeFilter(logging.Filter):
    """Drops APScheduler 3.x's per-skip warnings — ``Execution of job … skipped: maximum number of running instances
    reached`` (logger ``apscheduler.scheduler``, ``BaseScheduler._process_jobs``) and ``Run time of job … was missed
    by …`` (``apscheduler.executors.*``, ``run_job``) — which :class:`CycleWatch` reports as one line per long
    cycle instead. Matched on the format string, not the rendered text (APScheduler 3.11,
    https://github.com/agronholm/apscheduler/blob/3.x/src/apscheduler/schedulers/base.py)."""

    _PREFIXES = ('Execution of job "%s" skipped: maximum number of running', 'Run time of job "%s" was missed by')

    def filter(self, record: logging.LogRecord) -> bool:
        """False (dropped) for the two skip notices, True for anything else."""
        return not (isinstance(record.msg, str) and record.msg.startswith(self._PREFIXES))


_SKIP_NOTICES = _SkipNoticeFilter()


def _silence_skip_notices() -> None:
    """Attach :data:`_SKIP_NOTICES` to the loggers APScheduler writes its skip notices to (once: ``addFilter``
    ignores a filter already attached)."""
    for name in ("apscheduler.scheduler", "apscheduler.executors.default"):
        logging.getLogger(name).addFilter(_SKIP_NOTICES)


class CycleWatch:
    """Counts the cycles run and the run times skipped while one ran, and logs a cycle longer than its interval as
    one line: ``cycle took 7.2 s > scrape_interval 5 s; skipped 1`` (seconds of the job, start to end, heap turn
    included; the interval read when the cycle ends, so a reload's new one is used).

    ``interval()`` gives the scrape interval in seconds; ``clock`` is monotonic seconds."""

    def __init__(self, interval: Callable[[], float], clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._skipped = 0
        self.cycles = 0
        """Cycles completed (raised or not)."""

    def skipped(self) -> None:
        """One run time skipped (APScheduler's max-instances or missed event)."""
        with self._lock:
            self._skipped += 1

    def run(self, service: Service, heap: CycleHeap | None = None) -> None:
        """One cycle (:func:`_safe_cycle`), then the long-cycle line when it outlasted the interval."""
        with self._lock:
            before = self._skipped
        start = self._clock()
        _safe_cycle(service, heap)
        took = self._clock() - start
        interval = self._interval()
        with self._lock:
            skipped = self._skipped - before
            self.cycles += 1
        if took > interval:
            log.warning("cycle took %.1f s > scrape_interval %g s; skipped %d", took, interval, skipped)


def _safe_cycle(service: Service, heap: CycleHeap | None = None) -> None:
    """One cycle; then, between cycles, the heap's turn (:meth:`advisor.heap.CycleHeap.after_cycle`)."""
    try:
        service.run_cycle()
    except Exception:
        log.exception("evaluation cycle failed; the loop goes on")
    if heap is not None:
        heap.after_cycle()


def run_daemon(
    service: Service,
    registry: CollectorRegistry,
    listen: str,
    duration_seconds: float | None = None,
    on_listening: Callable[[str], None] | None = None,
    stop_event: threading.Event | None = None,
    config_path: Path | None = None,
    web_config: str | Path | None = None,
    enable_lifecycle: bool = False,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> int:
    """Serve and evaluate every ``scrape_interval`` until a signal, ``stop_event`` or ``duration_seconds``.

    SIGHUP (and ``POST /-/reload`` when ``enable_lifecycle``) re-reads ``config_path`` (Prometheus's
    reload semantics: an invalid new config is refused
    and the running one kept, with the reason logged and ``advisor_config_last_reload_successful`` 0).

    ``on_listening(url)`` is called once the HTTP server is bound (the URL has the real port when
    ``listen`` asked for port 0). Returns the process exit code (0 on a clean stop).

    The soft open-file limit is raised to the hard one first, and the HTTP server holds at most
    ``max_connections`` (``--web.max-connections``; see :func:`advisor.server.connection_budget`).

    Raises:
        ValueError: ``listen`` is not ``HOST:PORT``.
        OSError: the address cannot be bound.
    """
    hook = None
    if enable_lifecycle and config_path is not None:
        path = config_path

        def hook() -> tuple[bool, str]:
            return service.reload(path)

    raise_fd_limit()
    try:
        server = AdvisorHTTPServer(
            parse_listen(listen),
            service,
            registry,
            web_config=web_config,
            reload_hook=hook,
            max_connections=max_connections,
        )
    except OSError as exc:
        raise OSError(
            exc.errno, f"cannot listen on {listen}: {exc.strerror or exc} (another address: --listen HOST:PORT)"
        ) from None
    stop = stop_event or threading.Event()

    received: list[str] = []

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        received.append(name)
        if stop.is_set():
            log.warning("received %s again; exiting now without finishing the cycle", name)
            os._exit(128 + signum)
        log.info("received %s; stopping after the current cycle (send it again to force)", name)
        stop.set()

    reload_requested = threading.Event()

    def _on_hup(_signum: int, _frame: FrameType | None) -> None:
        reload_requested.set()

    def _on_user(signum: int, _frame: FrameType | None) -> None:
        # the default action of SIGUSR1/2 ends the process with no line (breaker 24: a stray `kill -USR1`, as some
        # log rotations send, stopped every deployment's monitoring silently)
        log.warning("received %s: ignored (SIGHUP reloads the config, SIGTERM stops)", signal.Signals(signum).name)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGUSR1, _on_user)
        signal.signal(signal.SIGUSR2, _on_user)
        if config_path is not None:
            signal.signal(signal.SIGHUP, _on_hup)

    # the handlers are in place before the URL is announced: a supervisor that sends SIGTERM as soon as it
    # reads the "serving" line gets the clean stop (exit 0), not the default action (killed, -15)
    server.start_background()
    if on_listening is not None:
        on_listening(server.url())

    _silence_skip_notices()
    scheduler = BackgroundScheduler(timezone=datetime.UTC)
    watch = CycleWatch(lambda: service.cfg.scrape_interval)

    def _skipped(event: JobEvent) -> None:
        """A run time passed while the previous cycle still ran (max_instances) or was missed."""
        if event.job_id == "cycle":  # the long cycle's line says how many (CycleWatch)
            service.metrics.cycles_skipped.inc()
            watch.skipped()

    scheduler.add_listener(_skipped, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
    heap = CycleHeap()  # the history is frozen after each cycle: no collection rescans it (advisor.heap)
    scheduler.add_job(
        watch.run,
        "interval",
        args=[service, heap],
        seconds=service.cfg.scrape_interval,
        next_run_time=datetime.datetime.now(datetime.UTC),
        max_instances=1,
        coalesce=True,
        id="cycle",
    )
    scheduler.start()
    deadline = None if duration_seconds is None else time.monotonic() + duration_seconds
    try:
        while not stop.is_set():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            stop.wait(0.2 if remaining is None else min(0.2, remaining))
            if reload_requested.is_set() and config_path is not None:
                reload_requested.clear()
                interval = service.cfg.scrape_interval
                ok, _ = service.reload(config_path)
                if ok and service.cfg.scrape_interval != interval:
                    scheduler.reschedule_job("cycle", trigger="interval", seconds=service.cfg.scrape_interval)
    finally:
        service.stop()  # the running cycle stops waiting for slow targets and finishes with what answered
        scheduler.shutdown(wait=True)
        heap.close()
        service.close()
        server.shutdown()
        server.server_close()
        why = received[0] if received else "stop requested" if stop.is_set() else "duration reached"
        log.info("stopped (%s) after %d cycle(s)", why, watch.cycles)
    return 0
