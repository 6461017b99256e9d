"""One target's scrape job: fetch the page and normalize it in the same thread, so its text never leaves it.

:func:`collect` is what every scrape worker runs — the daemon's in-process thread pool (``run --workers 1``) and
the worker processes of :mod:`advisor.workers` (``--workers N``)::

    CollectJob ──scrape()──▶ body ──observe()──▶ Collected (snapshot, detected engine id; no body)

A job carries every per-target setting (URL, engine id, models, limits), so whoever runs it needs no config of
its own; a result carries the snapshot and the engine id detected (``engine: auto``), never the page: the body is
dropped in the thread that fetched it, before the result is handed on, so a cycle never holds all N bodies.
Both are picklable (frozen dataclasses of plain values and an :class:`~advisor.domain.EngineSnapshot`), which is
what lets a worker process send them through a pipe. Engines cross that boundary by id
(:func:`advisor.engines.get_adapter` rebuilds the adapter).

The caller stamps the observation's time when it hands the result on (:meth:`advisor.service.Service.clock`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Final

import requests

from advisor import conventions as c
from advisor.domain import EngineSnapshot, reduce_frozen
from advisor.http_edge import Transport
from advisor.observe import observe
from advisor.redact import redact_url
from advisor.sources.scrape import ScrapeResult, scrape

log = logging.getLogger(__name__)

_ADAPTER_FAILURES_KEPT: Final = 1_000
_ADAPTER_FAILURES_LOGGED: set[tuple[str, str, str]] = set()
"""``(deployment, target URL, exception type)`` whose adapter failure was logged with its traceback (this process):
a page that breaks the adapter breaks it on every scrape, and its traceback each time buried every other line."""

_OBSERVING = threading.Lock()
"""One page is observed at a time per process. Parsing is pure Python, so under the GIL a second parser adds no
throughput, but every parser running takes GIL time from the threads still reading their bodies, which then miss
their deadlines. Measured with the overload trial of tests/reliability/test_isolation.py (16 pages of 40,000
series, 0.5 s interval, ``--workers 1``, 30 s on a loaded 2-core machine): one parser at a time read 9 targets with
7 scrape timeouts in 50 cycles; parsers in parallel read 3 with 28 timeouts in 24 cycles. Worker processes
(``--workers N``) each have their own lock."""


@dataclass(frozen=True, slots=True)
class CollectJob:
    """Everything one scrape of one target needs (picklable; the config is not consulted again).

    Attributes:
        deployment: the deployment's name (log lines and the worker's transport key).
        url: the target's ``/metrics`` URL, secrets included (it is sent, never logged unredacted).
        engine: an engine id of :data:`advisor.engines.ENGINES`, or ``"auto"`` (detect it on the page).
        served_model, configured_model: the deployment's ``served_model`` and ``model`` (see
            :func:`advisor.observe.observe`).
        connect_timeout, read_timeout: seconds (config ``scrape.connect_timeout``/``read_timeout``; their sum is the
            whole scrape's deadline, :func:`advisor.sources.scrape.scrape`).
        max_bytes: cap on the decoded body, bytes (config ``scrape.max_bytes``).
        sample_limit: samples the page may hold, ``0`` = no limit (config ``scrape.sample_limit``).
        label_limit: labels a parsed series may carry, ``0`` = no limit (config ``scrape.label_limit``).
        engine_auto_detected: where ``engine: auto`` detected ``engine`` (``"other"`` target, ``"this"`` one earlier;
            :func:`advisor.observe.observe`'s ``auto_detected``); ``None`` when ``engine`` is the configured one.
    """

    deployment: str
    url: str
    engine: str
    served_model: str | None
    configured_model: str | None
    connect_timeout: float
    read_timeout: float
    max_bytes: int
    sample_limit: int
    label_limit: int
    engine_auto_detected: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # one tuple of field values, pickled by the parent's sender per target per cycle (reduce_frozen)
        return reduce_frozen(self)


@dataclass(frozen=True, slots=True)
class Collected:
    """What one job produced: a snapshot, or why there is none (picklable; no page text).

    Attributes:
        ok: a snapshot was read.
        snapshot: the deployment's model's snapshot when ``ok``, else ``None``.
        engine: the engine id used (the one detected for ``engine: auto``), ``None`` when none could be: the
            caller keeps it for the deployment's next jobs.
        error_reason: one of :data:`advisor.conventions.SCRAPE_ERROR_REASONS` when not ``ok``, else ``None``.
        error_message: why, free of URL secrets (it may still quote the page: the caller passes it through
            :func:`advisor.redact.target_message`); ``None`` when ``ok``.
        duplicate_series: samples dropped as repeats of a series already on the page (0 for a clean page).
        duration_seconds: the scrape's wall time (monotonic), seconds; normalizing is not included.
        status_code: the HTTP status when a response arrived, else ``None``.
    """

    ok: bool
    snapshot: EngineSnapshot | None
    engine: str | None
    error_reason: str | None
    error_message: str | None
    duplicate_series: int
    duration_seconds: float
    status_code: int | None

    def __reduce__(self) -> tuple[Any, ...]:
        # one tuple of field values crossing the worker's pipe (advisor.domain.reduce_frozen)
        return reduce_frozen(self)


def failed(reason: str, message: str, duration_seconds: float = 0.0) -> Collected:
    """A :class:`Collected` for a job that produced nothing (a scrape worker died, an internal error)."""
    return Collected(False, None, None, reason, message, 0, duration_seconds, None)


def collect(job: CollectJob, transport: requests.Session | Transport) -> Collected:
    """Scrape ``job.url`` over ``transport`` and observe the page, in this thread; the body is dropped here.

    Never raises: a network failure or a limit is the scrape's reason (:func:`advisor.sources.scrape.scrape`), a
    page that does not read is the observation's (:func:`advisor.observe.observe`, ``strict``: the daemon's rule
    for pages of several models), and an adapter bug is ``parse_error`` with the message
    ``adapter error: <exception class>`` (logged with its traceback, naming the deployment and the redacted
    target), as the daemon has always reported it.
    """
    return observe_page(
        job, scrape(job.url, transport, job.connect_timeout, job.read_timeout, job.max_bytes, job.sample_limit)
    )


def observe_page(job: CollectJob, res: ScrapeResult) -> Collected:
    """The :class:`Collected` of ``job`` from its scrape's result: the observation step of :func:`collect` (shared
    with :mod:`advisor.scrape_loop`, which fetches the page itself). Never raises (see :func:`collect`)."""
    duration, status = res.duration_seconds, res.status_code
    if not res.ok or res.text is None:
        return Collected(False, None, None, res.error_reason, res.error_message, 0, duration, status)
    text = res.text
    del res  # from here the page's text is held by `text` alone, dropped when this function returns
    try:
        with _OBSERVING:
            seen = observe(
                text,
                job.engine,
                job.served_model,
                configured_model=job.configured_model,
                strict=True,
                label_limit=job.label_limit,
                auto_detected=job.engine_auto_detected,
            )
    except Exception as exc:  # an adapter bug must not stop other targets
        key = (job.deployment, job.url, type(exc).__name__)
        if key in _ADAPTER_FAILURES_LOGGED:  # once with its traceback, then quietly (breaker 24: 17,826 lines in 12 s)
            log.debug("deployment=%s target=%s: adapter failed again: %r", job.deployment, redact_url(job.url), exc)
        else:
            if len(_ADAPTER_FAILURES_LOGGED) < _ADAPTER_FAILURES_KEPT:
                _ADAPTER_FAILURES_LOGGED.add(key)
            log.exception(
                "deployment=%s target=%s: adapter failed (logged once per target and error; the target's state "
                "says parse_error while it lasts)",
                job.deployment,
                redact_url(job.url),
            )
        return Collected(
            False, None, None, c.REASON_PARSE_ERROR, f"adapter error: {type(exc).__name__}", 0, duration, status
        )
    finally:
        del text
    return Collected(
        seen.snapshot is not None,
        seen.snapshot,
        seen.engine,
        seen.error_reason,
        seen.error_message,
        seen.duplicate_series,
        duration,
        status,
    )
