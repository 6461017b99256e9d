"""The composition root: wires config, sources, adapters, rules, exporter and notifiers.

:meth:`Service.run_once` is a readable list of named steps, each timed into
``advisor_cycle_step_duration_seconds{step}``::

    scrape → normalize → evaluate → rules → publish → notify → persist

The I/O half lives here (scraping, Prometheus, notifying, persisting, metrics); the evaluation half is the pure
:class:`advisor.tracker.Tracker`, fed each observation and asked for one :class:`~advisor.tracker.Tick` per
cycle — the same tracker ``backtest`` replays. Everything a config builds (config, notifier, workers, ack store,
Prometheus source, state file, sessions) is one :class:`Runtime`, built whole and swapped in with one reference
on reload; a reload that fails anywhere changes nothing.

One target's failure is recorded (``advisor_target_up`` 0, ``advisor_scrape_errors_total{reason}``) and
never stops the others; one deployment's failure is logged, counted and skipped. Nor does one target slow the
others: the daemon's cycle (:meth:`Service.run_cycle`) waits for scrapes at most half an interval, a straggler
keeps running and is consumed by a later cycle, and a target already in flight is not asked twice — in effect
each target has its own scrape loop, as in Prometheus. Scrape threads only produce results; the tracker is fed
on the cycle thread, under the cycle lock, which is never held across network I/O (a reload takes it for the
swap alone). A scrape is fetched and normalized where it runs (:func:`advisor.collect.collect`: the page never
leaves that thread) — on this process's threads (``run --workers 1``) or in worker processes
(:mod:`advisor.workers`, ``--workers N``); the cycle thread adopts the engine detected and records the snapshot.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from advisor import conventions as c
from advisor.acks import AckStore
from advisor.assembly import (
    build_rules,
    deployment_context,
    in_shard,
    resolve_targets,
    sd_mtimes,
    sized_for_engine,
)
from advisor.collect import Collected, CollectJob
from advisor.collect import failed as collect_failed
from advisor.config import (
    Config,
    Deployment,
    check_runtime_paths,
)
from advisor.domain import Recommendation, TimedSnapshot, rfc3339
from advisor.engines import get_adapter
from advisor.engines.base import EngineAdapter
from advisor.engines.detect import auto_engine_mismatch
from advisor.engines.dynamo import WORKER_KV_NAMES
from advisor.errors import ConfigError, StateError
from advisor.evaluate import Quality, engines_behind
from advisor.exporter import AdvisorCollector, SelfMetrics
from advisor.files import read_text_capped
from advisor.http_edge import ClosableTransport, Transport, target_transport
from advisor.listing import join_bounded
from advisor.notify.notifier import SHUTDOWN_FLUSH_SECONDS, Notifier, build_notifier
from advisor.notify.payload import Links
from advisor.observe import Observation, identify, observe
from advisor.platforms import flag_text
from advisor.redact import endpoint_key, redact_url, target_message
from advisor.results import CycleResult
from advisor.rules.base import DeploymentContext, Rule
from advisor.rules.common import effect_label
from advisor.rules.lifecycle import RESOLVED_REMOVED, Lifecycle, PendingRestart, Transition
from advisor.scrape_loop import ScrapeLoop
from advisor.sources.prometheus import (
    MIN_POINT_GAP_STEPS,
    PrometheusSource,
    PromGroup,
    PromHistory,
    incremental_range,
    prometheus_down,
    same_scrape,
)
from advisor.state import load_notifying, load_state, save_state
from advisor.tracker import ClockStep, Tick, Tracker
from advisor.workers import ProcessWorkers, usable_cpus

log = logging.getLogger(__name__)

FAULT_BETWEEN_OUTBOX_AND_STATE = "between_outbox_and_state"
FAULT_BETWEEN_STATE_AND_OUTBOX = "between_state_and_outbox"
FAULT_POINT = os.environ.get("CAPACITY_ADVISOR_FAULT_POINT", "")
"""TEST ONLY (tests/reliability/test_crash_window.py): ``between_outbox_and_state`` makes the daemon SIGKILL itself
in the first cycle with transitions, after every receiver's outbox accepted them and before the state file is
written again; ``between_state_and_outbox`` after the state file recorded them and before any outbox accepted
them. Read once at start; never set it in production."""


def _die_here() -> None:
    """The test-only fault point: the process kills itself (SIGKILL: no handler, no flush, no cleanup)."""
    log.critical("fault point %s: killing the process (test only)", FAULT_POINT)
    os.kill(os.getpid(), signal.SIGKILL)


CYCLE_WAIT_SHARE = 0.5
"""The daemon's cycle waits for this cycle's scrapes and queries at most this share of the scrape interval (and
never past their deadline); a target that has not answered by then keeps running and its result is consumed by
the next cycle, so the slowest target never holds the others' evaluation up (in effect each target has its own
scrape loop, as in Prometheus)."""

HEALTH_SLACK_SECONDS = 5.0
"""``/healthz`` fails when no cycle completed within :data:`STALL_INTERVALS` scrape intervals plus this slack
(start-up counts from process start)."""

STALL_INTERVALS: Final = 3
"""Scrape intervals without a completed cycle after which the loop counts as stalled: ``/healthz`` fails, and the
next evaluation restarts the pending for-durations (:func:`evaluation_gap_bound`)."""


def evaluation_gap_bound(scrape_interval: float) -> float:
    """The longest gap between two evaluations of a deployment that still vouches for the time between them
    (seconds): :data:`STALL_INTERVALS` scrape intervals plus :data:`HEALTH_SLACK_SECONDS`, the bound past which
    ``/healthz`` calls the loop stalled (50 s at the default 15 s interval). After a longer one (a stalled loop, a
    suspended VM, the clock jumping forward) the pending for-durations restart at the next evaluation
    (:class:`advisor.rules.lifecycle.Lifecycle` ``max_gap_seconds``): a for-duration counts time its condition
    was seen to hold, and an hour's jump must not open a rule seen for two scrapes."""
    return STALL_INTERVALS * scrape_interval + HEALTH_SLACK_SECONDS


FUTURE_SAMPLE_SECONDS = 60.0
"""``source: prometheus``: a point stamped more than this ahead of the advisor's clock (a ``/federate`` sample in
microseconds, a store or exporter clock set wrong) fails its target for that read rather than entering the
history: appended, it would hide every later point (each must be newer than the newest held) and the target
would read fresh with frozen values. NTP keeps clocks within a second; a minute is no doubt."""

_Key = tuple[str, str]
"""``(deployment, target URL)``."""

_R = TypeVar("_R")


def _log_clock_step(step: ClockStep) -> None:
    """``source: scrape``: say once, with its size, that the clock stepped back and the deployment's histories
    restarted (:meth:`advisor.tracker.Tracker.observe`; the Prometheus source says the same in
    :meth:`Service._clock_stepped_back`)."""
    log.warning(
        "deployment=%s: the clock stepped back %s s (it reads %s, the newest point was at %s): the %d point(s) "
        "scraped before the step are dropped and the window restarts; targets are judged on the points scraped "
        "since",
        step.deployment,
        f"{step.seconds:,.0f}",
        rfc3339(step.now),
        rfc3339(step.newest),
        step.dropped,
    )


def _log_restarts(restarts: Sequence[PendingRestart], bound: float) -> None:
    """Say once per evaluation, with the gap's size, that pending for-durations restarted after a gap longer
    than ``bound`` seconds or a step back of the clock (:attr:`advisor.tracker.Tick.restarts`); the conditions are
    named (at most :data:`advisor.listing.MAX_LISTED`), each with how long it had been pending."""
    worst = max(restarts, key=lambda r: abs(r.gap_seconds))
    span = f"from {rfc3339(worst.previous)} to {rfc3339(worst.now)}"
    if worst.gap_seconds < 0:
        why = f"the clock stepped back {-worst.gap_seconds:,.0f} s since the previous evaluation ({span})"
    else:
        why = f"no evaluation for {worst.gap_seconds:,.0f} s ({span}; the loop counts as stalled after {bound:g} s)"
    deps = {r.deployment for r in restarts}
    one = len(deps) == 1
    items = [
        f"{'' if one else r.deployment + '/'}{rule} (pending {held:,.0f} s)"
        for r in restarts
        for (rule, held) in r.rules
    ]
    log.warning(
        "%s%s: the for-durations of %d pending condition(s) restart at this evaluation, which cannot vouch that "
        "they held in between: %s",
        f"deployment={worst.deployment}: " if one else f"{len(deps)} deployments: ",
        why,
        len(items),
        join_bounded(items),
    )


class WorkerPool:
    """The scrape and query workers: ``submit``/``shutdown`` as :class:`concurrent.futures.ThreadPoolExecutor`, but
    on daemon threads, so a request still running (bounded by its deadline) never holds the process's exit on
    SIGTERM (the executor's threads are joined at interpreter exit). Work queued before :meth:`shutdown` still
    runs."""

    def __init__(self, workers: int, name: str = "scrape") -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., _R], *args: Any) -> Future[_R]:
        """Run ``fn(*args)`` on a worker; its result or exception lands in the returned future.

        Raises:
            RuntimeError: the pool was shut down.
        """
        if self._closed:
            raise RuntimeError("the worker pool is shut down")
        f: Future[_R] = Future()
        self._queue.put((f, fn, args))
        return f

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            f, fn, args = item
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn(*args))
            except BaseException as exc:  # the future carries it to whoever reads the result
                f.set_exception(exc)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers once the queued work is done; ``wait``: block until they have."""
        if not self._closed:
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)
        if wait:
            for t in self._threads:
                t.join()


@dataclass
class _Deployment:
    """What the I/O side keeps per deployment: its configuration, the adapter once known (``engine: auto``
    detects it) and, for ``source: prometheus``, the series names to fetch."""

    spec: Deployment
    adapter: EngineAdapter | None  # None while engine: auto has not been detected yet
    prom_wanted: frozenset[str] | None = None  # source: prometheus — the series names to fetch
    prom_refresh: int = 0  # cycles until the names are listed again
    # source: prometheus — the instances behind the selector when they are read in batches (None: one query)
    prom_instances: tuple[str, ...] | None = None
    prom_until: float | None = None  # source: prometheus — the end of the last complete read (None: read the window)
    # source: prometheus — when the last complete read's answer arrived, if later than one scrape interval after it
    # began (None: within its cycle); a read that slow delays the next one (Service._read_since)
    prom_answered_late: float | None = None
    prom_late_logged: bool = False  # the first read past the window after a slow one was logged (once)
    # source: prometheus — per target, the newest point read: its raw scrape time (PromGroup.scraped, nan unknown)
    # and, when observation refused it, (error_reason, error_message); see Service._apply_groups
    prom_last: dict[str, tuple[float, tuple[str | None, str | None] | None]] = dataclasses.field(default_factory=dict)
    # source: prometheus — per target, its scrape jobs down while another is up (PromGroup.down_jobs), as last logged
    prom_down: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    prom_warned: frozenset[str] = frozenset()  # source: prometheus — the last read's warnings (logged when new)
    detected_on: str | None = None  # engine: auto — the target the adapter was detected on (None: not a scrape)


def _num(v: Any) -> str:
    """A number as an operator reads it: 447,440 / 54.62 / 0.9 / unbounded."""
    if v is None:
        return "unbounded"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"


def prometheus_source(cfg: Config, base_dir: Path | None, source: str = "config") -> PrometheusSource:
    """The configured Prometheus API client; secret files are read now (relative to ``base_dir``, ``~``
    expanded). ``source`` names the config file in errors.

    Raises:
        ConfigError: a secret or CA file cannot be read, is empty, spans lines or holds what an HTTP header
            cannot carry (the message names the field, never the secret).
    """
    p = cfg.prometheus
    assert p is not None

    def path_of(name: str) -> Path:
        f = Path(name).expanduser()
        return base_dir / f if base_dir is not None and not f.is_absolute() else f

    def fail(field_: str, message: str) -> ConfigError:
        return ConfigError([(f"prometheus.{field_}", message)], source)

    def secret(field_: str, name: str | None) -> str | None:
        if name is None:
            return None
        f = path_of(name)
        try:
            text = read_text_capped(f, 64 * 1024).strip()
        except OSError as exc:
            raise fail(field_, f"cannot read {str(f)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise fail(field_, f"{str(f)!r} is not UTF-8 text") from None
        if not text or "\n" in text or "\r" in text:
            raise fail(field_, f"{str(f)!r} is empty or has more than one line")
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise fail(field_, f"{str(f)!r} holds characters an HTTP header cannot carry (not Latin-1)") from None
        if any(ch < " " and ch != "\t" for ch in text):
            raise fail(field_, f"{str(f)!r} holds control characters")
        return text

    ca_file = None if p.ca_file is None else str(path_of(p.ca_file))
    token = secret("bearer_token_file", p.bearer_token_file)
    password = secret("password_file", p.password_file)
    try:
        return PrometheusSource(
            p.url,
            bearer_token=token,
            username=p.username,
            password=password,
            ca_file=ca_file,
            headers=p.headers,
            connect_timeout=p.connect_timeout,
            read_timeout=p.read_timeout,
            max_bytes=p.max_bytes,
        )
    except ValueError as exc:  # what the config model cannot see (e.g. a CA file that is not there)
        raise fail("ca_file" if str(exc).startswith("ca_file") else "url", str(exc)) from None


def pool_factor_needed(evidence: Mapping[str, Any]) -> float | None:
    """How many times the pool must grow, for a turn whose evidence says it does not hold the current demand by
    itself (:data:`advisor.conventions.EVIDENCE_POOL_FACTOR_NEEDED`); ``None`` otherwise."""
    factor = evidence.get(c.EVIDENCE_POOL_FACTOR_NEEDED)
    return float(factor) if isinstance(factor, int | float) and not isinstance(factor, bool) else None


def not_enough_alone(evidence: Mapping[str, Any]) -> str:
    """`` (alone not enough: the pool must grow ×F)`` when :func:`pool_factor_needed` gives F, else ``""``: the
    console's one line must not read as the whole fix when the description says it is not."""
    factor = pool_factor_needed(evidence)
    return "" if factor is None else f" (alone not enough: the pool must grow ×{factor:.2f})"


def closing_alternative(r: Any) -> str:
    """`` — [queue_growth] replicas 1 → 2 closes the gap`` when the suggested turn alone is not enough
    (:func:`not_enough_alone`) and an alternative closes the gap alone, the best-ranked such; else ``""``. The one
    line must not hide the turn that fixes it behind "+4 alternatives" (a fresh user saw "set gpu_memory_utilization
    0.5 → 0.9 (alone not enough: ×3.21)" while "replicas 1 → 2 … closes the gap" ranked 4th, 2026-12-06)."""
    alt = _closing(r)
    if alt is None:
        return ""
    return f" — [{alt['rule']}] {alt['dial']} {alt['current']} → {alt['suggested']} closes the gap"


def _closing(r: Any) -> Mapping[str, Any] | None:
    """The best-ranked alternative that closes the gap alone, when the suggested turn alone does not; else ``None``."""
    if not not_enough_alone(r.evidence):
        return None
    return next((alt for alt in r.alternatives if alt.get("sufficient")), None)


def flags_text(r: Any) -> str:
    """The line's ``flag:`` part: the suggested turn's flag and, when it is not enough alone and an alternative closes
    the gap (:func:`closing_alternative`), that turn's flag after it — a walkthrough copied the one flag the line
    showed, the partial fix's (2026-12-07)."""
    text = flag_text(r.flag, r.evidence)
    alt = _closing(r)
    return text if alt is None else f"{text}; closes the gap: {flag_text(alt.get('flag'), alt)}"


def format_transition(t: Transition) -> str:
    """One readable line per incident transition: what, why, the suggested turn with its numbers and flag, and
    how many alternatives and withheld turns ride with it (``(+3 alternatives, 1 withheld)``).

    A resolved incident's line says what happened — ``resolved: <reason>``, the rules' clear readings (or that its
    deployment is no longer configured, or that it was folded into another incident) — and names the turn it last
    suggested, as history; it counts no alternatives or withheld turns (none applies any longer):
    ``[12:04:05] RESOLVED chat-8b saturation — resolved: KV usage 40.0% (resolves below 80%), 0 waiting, 0
    preemptions (last suggested [kv_saturation] kv_cache_dtype auto → fp8; id 3ec50bdbf032fe23)``."""
    r = t.recommendation
    when = time.strftime("%H:%M:%S", time.localtime(r.resolved_at if t.kind == "resolved" else r.opened_at))
    problem = r.problem or r.rule
    turn = f"[{r.rule}] {r.dial} {r.current} → {r.suggested}"  # the rule apart from the dial it turns
    if t.kind == "resolved":
        why = t.reason or r.resolved_reason or "the condition cleared"
        return f"[{when}] RESOLVED {r.deployment} {problem} — resolved: {why} (last suggested {turn}; id {r.id})"
    extra = f"(+{len(r.alternatives)} alternative{'' if len(r.alternatives) == 1 else 's'}, {len(r.withheld)} withheld)"
    if t.kind == "updated":
        now = time.strftime("%H:%M:%S", time.localtime(r.updated_at) if r.updated_at is not None else time.localtime())
        return (
            f"[{now}] UPDATED {r.deployment} {problem}: now {turn}{not_enough_alone(r.evidence)}"
            f"{closing_alternative(r)} {extra} "
            f"({t.reason}; still open, id {r.id})"
        )
    effects = "; ".join(
        f"{effect_label(k)} {_num(v.get('before'))} → {_num(v.get('after'))}"
        for k, v in list(r.predicted_effect.items())[:3]
    )
    return (
        f"[{when}] OPENED {r.severity.upper()} {r.deployment} {problem}: {turn}{not_enough_alone(r.evidence)}"
        f"{closing_alternative(r)} {extra}"
        f" | why: {t.reason} | effect: {effects} | flag: {flags_text(r)}"
        f" | confidence {r.confidence:.2f} | id {r.id}"
    )


@dataclass
class Runtime:
    """Everything one config builds: built whole by :meth:`Service._build_runtime` (every part that can
    fail first) and swapped in with one reference (``Service.runtime``), so a reload that fails anywhere
    leaves the running one untouched. What outlives a reload — target histories, open recommendations,
    pending for-durations — lives in the :class:`~advisor.tracker.Tracker`, not here.

    Attributes:
        cfg, base_dir: the config and the folder its relative paths are resolved from.
        deployments: this shard's deployments (configuration, adapter, Prometheus series names).
        plan: ``(context, target URLs)`` per deployment, for the tracker.
        rules, quality: what the tracker evaluates with.
        state_file: where open recommendations and acks are persisted (``None``: memory only).
        prom: the Prometheus source (``None``: no ``source: prometheus`` deployment).
        acks: the snooze/ack store the notifier and the HTTP API share.
        notifier: the receivers' workers.
        pool, pool_size: the scrape/query workers.
        transports: one HTTP transport per ``(deployment, target URL)`` (:func:`~advisor.http_edge.target_transport`).
        sd_mtimes: modification times of the ``file_sd`` files last read.
        outbox: the notifier's outbox folder (``None``: in memory).

    A reload keeps the parts whose inputs did not change (the ack store of the same state file, the notifier
    of the same receivers, outbox and ack store, the transports of the targets that stay).
    """

    cfg: Config
    base_dir: Path | None
    deployments: list[_Deployment]
    plan: list[tuple[DeploymentContext, list[str]]]
    rules: list[Rule]
    quality: Quality
    state_file: Path | None
    prom: PrometheusSource | None
    acks: AckStore
    notifier: Notifier
    pool: WorkerPool
    pool_size: int
    transports: dict[tuple[str, str], ClosableTransport]
    sd_mtimes: dict[str, float]
    outbox: Path | None = None

    def transport(self, deployment: str, url: str) -> Transport:
        """The target's transport (made on first use: a target ``file_sd`` added)."""
        t = self.transports.get((deployment, url))
        if t is None:
            t = self.transports[(deployment, url)] = target_transport(url)
        return t

    def close(
        self,
        timeout: float,
        keep: frozenset[ClosableTransport] = frozenset(),
        wait: bool = True,
        close_notifier: bool = True,
    ) -> None:
        """Flush and stop the notifier (unless ``close_notifier`` is false: a successor kept it; without ``wait``
        on a thread of its own, so a reload never waits on a receiver), the workers, the Prometheus client and
        the transports not in ``keep``."""
        if close_notifier and wait:
            self.notifier.close(timeout)
        elif close_notifier:
            threading.Thread(target=self.notifier.close, args=(timeout,), name="notify-close", daemon=True).start()
        self.pool.shutdown(wait=wait)
        if self.prom is not None:
            self.prom.close()
        for t in self.transports.values():
            if t not in keep:
                t.close()


def _same_folder(a: Path | None, b: Path | None) -> bool:
    """Whether two outbox folders are one (``None``: in memory, never shared)."""
    return a is not None and b is not None and a.resolve() == b.resolve()


def _pool_size_for(deployments: Sequence[_Deployment], plan: Sequence[tuple[DeploymentContext, list[str]]]) -> int:
    """One worker per scrape target and per ``source: prometheus`` deployment, at least 1, at most 32."""
    jobs = sum(len(urls) if d.spec.source == "scrape" else 1 for d, (_, urls) in zip(deployments, plan, strict=True))
    return max(1, min(32, jobs))


CPU_PER_TARGET_SECONDS: Final = 0.0015
"""CPU one process spends per scrape target per cycle, scrape to evaluation, on one core: ~1.5 ms, rounded up from
what ``bench/fleet.py --prometheus`` measures for the daemon on the 62 KB vLLM 0.33 page with its scrape loop
(``advisor.scrape_loop``; ``docs/performance.md``: 1.41 ms at 1,000 targets, 1.70 ms at 100 where the fixed costs
weigh more; 2.0–2.2 ms with the 32 scrape threads before it). The estimate :func:`workers_needed` weighs."""

WORKERS_CPU_SHARE: Final = 0.25
"""Without ``--workers``, worker processes start only when one core could not do a cycle's work in this share of the
scrape interval (:func:`workers_needed`). A quarter leaves one core half of the half interval a cycle may take
(:data:`CYCLE_WAIT_SHARE`) for the load the estimate does not see — a page larger than the capture, a busy host, the
collector's full passes — while a worker process costs ~50 MB and ~0.4 s of start-up, and pickling snapshots across
processes costs 25–40 % more CPU per target (``docs/performance.md``): below it they buy nothing."""


def workers_needed(targets: int, scrape_interval: float) -> bool:
    """Whether one core could not do a cycle over ``targets`` scrape targets in :data:`WORKERS_CPU_SHARE` of
    ``scrape_interval`` (s): ``targets × CPU_PER_TARGET_SECONDS > WORKERS_CPU_SHARE × scrape_interval``.

    At 15 s that is from 2,501 targets (2,501 × 1.5 ms > 3.75 s, a quarter of 15 s); at 30 s from 5,001; at 5 s
    from 834; at 1 s from 167."""
    return targets * CPU_PER_TARGET_SECONDS > WORKERS_CPU_SHARE * scrape_interval


class Service:
    """Holds the runtime and the tracker across cycles; ``run_once`` does one cycle."""

    runtime: Runtime
    tracker: Tracker

    def __init__(
        self,
        cfg: Config,
        collector: AdvisorCollector,
        metrics: SelfMetrics,
        base_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        ignore_for: bool = False,
        on_transition: Callable[[Transition], None] | None = None,
        shard: tuple[int, int] = (0, 1),
        workers: int | None = 1,
    ) -> None:
        """Build the runtime from a validated config.

        ``shard=(i, n)``: this advisor evaluates only the deployments whose stable hash modulo ``n`` is ``i``
        (all replicas of a deployment stay on one advisor, so its rules see every replica).

        ``workers``: scrape workers (``run --workers``): 1 = the in-process thread pool; N > 1 = N worker processes
        (:class:`advisor.workers.ProcessWorkers`, targets split by stable hash of the URL); ``None`` = the CPUs this
        process may use (:func:`advisor.workers.usable_cpus`) when one core could not do a cycle over the config's
        scrape targets in a quarter of the scrape interval (:func:`workers_needed`), else 1. The choice is logged.

        Raises:
            CapacityError: a deployment's capacity pass cannot run.
            StateError: the state file or outbox is unreadable or of another version.
            ConfigError: a secret file cannot be read.
        """
        self.collector = collector
        self.metrics = metrics
        self.clock = clock
        self.ignore_for = ignore_for
        self.on_transition = on_transition
        self.shard = shard
        metrics.config_reload_timestamp.set(clock())  # the start-up load is the first successful load
        self.result: CycleResult | None = None
        self.started = clock()
        """When the service was built (unix s): ``/healthz`` counts the first cycle from here."""
        self._round_started: float | None = None
        self.last_progress: float | None = None
        self.last_reload: tuple[bool, str, float] | None = None
        """The last reload's ``(ok, message, unix s)``; ``None`` before any (the status page's banner)."""
        # the cycle lock: held while the tracker or the runtime reference is read or changed, never across
        # network I/O (scrapes and queries run outside it), so a reload waits for CPU work only
        self._lock = threading.RLock()
        self._reload_lock = threading.Lock()  # one reload at a time (SIGHUP and POST /-/reload)
        self._inflight: dict[_Key, Future[tuple[Collected, float]]] = {}
        # each target's last scrape duration, seconds: scrapes are queued fastest first (see _submit_scrapes)
        self._scrape_seconds: dict[_Key, float] = {}
        self._prom_inflight: dict[str, Future[None]] = {}
        self._stopping = threading.Event()
        # every scrape and query future reports its own end here (a done callback, on the worker): the cycle
        # thread consumes each result as it arrives instead of polling every future in flight
        self._finished: queue.SimpleQueue[tuple[_Key | None, Future[Any]]] = queue.SimpleQueue()
        self.scrape_errors: dict[tuple[str, str, str], int] = {}
        self._errors_lock = threading.Lock()
        self._procs: ProcessWorkers | None = None
        # the in-process scrape path (workers 1): plain-http targets on one thread (advisor.scrape_loop)
        self._loop: ScrapeLoop | None = None
        self._loop_keys: frozenset[_Key] = frozenset()
        rt = self._build_runtime(cfg, base_dir, None)
        dq = cfg.data_quality
        self.tracker = Tracker(
            rt.rules,
            evaluation_window=cfg.evaluation_window,
            scrape_interval=cfg.scrape_interval,
            quality=rt.quality,
            cooldown_seconds=cfg.rules.cooldown,
            ignore_for=ignore_for,
            model_error_bound=dq.capacity_model_error_bound,
            replica_windows=(cfg.rules.replicas.scale_up_window, cfg.rules.replicas.scale_down_window),
            max_gap_seconds=evaluation_gap_bound(cfg.scrape_interval),
            replica_min_history=float(cfg.rules.replicas.min_history),
            resolve_hold_seconds=cfg.rules.resolve_for,
        )
        try:
            restored = load_state(rt.state_file) if rt.state_file is not None else []
            notifying = load_notifying(rt.state_file) if rt.state_file is not None else []
        except BaseException:
            rt.close(1.0)
            raise
        self.runtime = rt
        self._apply(rt)
        _, resolved_ids = rt.notifier.alert_ids()
        for r in restored:
            if r.id in resolved_ids:  # written by a release that notified before it persisted
                log.warning("deployment=%s: %s is resolved in the outbox; not re-opened", r.deployment, r.id)
        n = self.tracker.restore([r for r in restored if r.id not in resolved_ids])
        if n:
            log.info("restored %d open recommendation(s) from %s", n, rt.state_file)
        self._reconcile(rt, notifying, restored)
        self._start_workers(workers)

    def _start_workers(self, workers: int | None) -> None:
        """Start the scrape worker processes (``workers`` > 1, or ``None``: the usable CPUs, once one core could not
        do a cycle over the config's scrape targets in a quarter of the scrape interval, :func:`workers_needed`);
        logged with the estimate."""
        if workers is None:
            budget = usable_cpus()
            n, why = budget.cpus, budget.describe()
            targets = sum(len(self._urls(d)) for d in self.runtime.deployments if d.spec.source == "scrape")
            interval = self.runtime.cfg.scrape_interval
            estimate = (
                f"{targets} scrape target(s) × ~{CPU_PER_TARGET_SECONDS * 1000:g} ms = "
                f"{targets * CPU_PER_TARGET_SECONDS:.3g}s of CPU per cycle"
            )
            share = f"{WORKERS_CPU_SHARE:g} of the {interval:g}s interval ({WORKERS_CPU_SHARE * interval:.2f}s)"
            if n > 1 and not workers_needed(targets, interval):
                n, why = 1, f"{why}; {estimate} <= {share}, one process is enough"
            elif n > 1:
                why = f"{why}; {estimate} > {share}"
        else:
            n, why = workers, "--workers"
        # one process as given (once, demo, --workers 1) is no news: said at debug (a walkthrough read "(--workers)"
        # in once, which has no such flag)
        log.log(
            logging.DEBUG if workers == 1 else logging.INFO,
            "workers=%d (%s)%s",
            n,
            why,
            "" if n > 1 else ": scraping on this process's threads",
        )
        self.metrics.workers.set(n)
        if n > 1:
            try:
                self._procs = ProcessWorkers(n, self.clock, self.metrics)
                if not self._procs.wait_ready():
                    log.warning("workers: not all %d worker processes were ready within the start-up wait", n)
            except BaseException:
                self.runtime.close(1.0)
                raise

    def _reconcile(
        self, rt: Runtime, notifying: Sequence[tuple[str, Recommendation]], restored: Sequence[Recommendation]
    ) -> None:
        """Start-up: make the outbox agree with the state file (crash consistency, :mod:`advisor.state`).

        The transitions a stopped advisor was handing to the notifier (``notifying``) are submitted again (the
        outbox leaves out those it holds: same idempotency keys); an alert an outbox fired and still holds whose
        id is not open here (it will not re-fire under that id) gets its ``resolved``, and so does an open
        recommendation of the state file whose deployment is no longer configured (``resolved_reason``
        ``removed``); then the state file is written without ``notifying``."""
        now = self.clock()
        links = Links(self.external_url, rt.cfg.runbook_base_url)
        cycle = [(k, r) for k, r in notifying if k != "opened" or not rt.acks.suppressed(r.id, now)]
        if cycle:
            log.info("re-submitting %d transition(s) the previous advisor was notifying", len(cycle))
            rt.notifier.submit_cycle(cycle, links)
        open_ids = {r.id for r in self.tracker.lifecycle.open_recommendations()}
        firing, resolved_ids = rt.notifier.alert_ids()
        known = set(self.tracker.deployment_names)
        # restored records of configured deployments are the lifecycle's: open, or folded (it resolves those)
        held = {r.id for r in restored if r.deployment in known and r.id not in resolved_ids}
        for r in restored:
            if r.deployment not in known and r.id not in resolved_ids:
                firing.setdefault(r.id, r)
        orphans = [
            ("resolved", dataclasses.replace(r, resolved_at=now, resolved_reason=RESOLVED_REMOVED))
            if r.deployment not in known
            else ("resolved", dataclasses.replace(r, resolved_at=now))
            for i, r in firing.items()
            if i not in open_ids and i not in held
        ]
        for _, r in orphans:
            log.warning("deployment=%s: %s fired and is not open in the state file; resolving it", r.deployment, r.id)
        if orphans:
            rt.notifier.submit_cycle(orphans, links)
        if (notifying or orphans or len(held) != len(restored)) and rt.state_file is not None:
            try:
                save_state(rt.state_file, self.tracker.lifecycle.open_recommendations(), now)
            except StateError as exc:
                log.error("could not persist open recommendations; they stay in memory: %s", exc)

    # -- the runtime ---------------------------------------------------------------------------------------
    def _build_runtime(self, cfg: Config, base_dir: Path | None, old: Runtime | None) -> Runtime:
        """Build everything ``cfg`` needs, touching nothing that runs: on any failure what was built is
        released and the error propagates.

        Raises:
            ConfigError: a path, a secret or a ``file_sd`` file is unusable.
            CapacityError: a deployment's capacity pass cannot run.
            StateError: the state file or an outbox is unreadable or of another version.
        """
        check_runtime_paths(cfg, base_dir)
        known: set[str] = set()
        engines: dict[str, str] = {}
        if old is not None:
            with self._lock:  # a reload builds beside the running cycle: read the tracker under its lock
                known = set(self.tracker.deployment_names)
                engines = {n: self.tracker.context(n).engine for n in known}
        old_adapters = {d.spec.name: d.adapter for d in old.deployments} if old is not None else {}
        old_detected_on = {d.spec.name: d.detected_on for d in old.deployments} if old is not None else {}
        deployments: list[_Deployment] = []
        plan: list[tuple[DeploymentContext, list[str]]] = []
        for dep in cfg.deployments:
            if not in_shard(dep.name, self.shard):
                continue
            ctx = deployment_context(dep, base_dir)
            urls = resolve_targets(dep, base_dir)
            adapter = None if dep.engine == "auto" else get_adapter(dep.engine)
            detected_on = old_detected_on.get(dep.name)
            # engine: auto keeps the engine it detected while the target it was detected on stays (a reload that
            # replaced every target detects again: breaker 17, the new targets' engine refused for good)
            stays = detected_on is None or endpoint_key(detected_on) in {endpoint_key(u) for u in urls}
            if adapter is None and old_adapters.get(dep.name) is not None and dep.name in known and stays:
                adapter = old_adapters[dep.name]
                ctx = dataclasses.replace(ctx, engine=engines[dep.name])
            else:
                detected_on = None
            deployments.append(_Deployment(dep, adapter, detected_on=detected_on))
            plan.append((ctx, urls))
        rules = build_rules(cfg)
        outbox = Path(cfg.outbox_dir) if cfg.outbox_dir else None
        if outbox is not None and base_dir is not None and not outbox.is_absolute():
            outbox = base_dir / outbox
        state_file = Path(cfg.state_file) if cfg.state_file else None
        if state_file is not None and base_dir is not None and not state_file.is_absolute():
            state_file = base_dir / state_file
        dq = cfg.data_quality
        quality = Quality(cfg.scrape_interval, dq.stale_after_intervals, dq.frozen_after, dq.capacity_model_error_bound)
        sd = sd_mtimes(cfg, base_dir)
        prom: PrometheusSource | None = None
        pool: WorkerPool | None = None
        # the same state file: the same store (snoozes made a moment ago stay in force, nothing re-read)
        acks = old.acks if old is not None and old.state_file == state_file else None
        try:
            if any(d.source == "prometheus" for d in cfg.deployments):
                prom = prometheus_source(cfg, base_dir)
            if acks is None:
                acks = AckStore(state_file, clock=self.clock)
            size = _pool_size_for(deployments, plan)
            pool = WorkerPool(size)
            # the notifier last: nothing after it can fail
            if (
                old is not None
                and old.acks is acks
                and old.outbox == outbox
                and old.base_dir == base_dir
                and tuple(old.cfg.receivers) == tuple(cfg.receivers)
            ):
                notifier = old.notifier  # unchanged: kept, with its queues and re-send state
            elif old is not None and outbox is not None and _same_folder(old.outbox, outbox):
                with self._lock:  # no cycle submits to the notifier being handed over
                    notifier = self._hand_over(old, cfg, outbox, base_dir, acks)
            else:
                notifier = self._notifier(cfg, outbox, base_dir, acks)
                if old is not None and old.outbox is None:
                    notifier.take_over(old.notifier)  # the in-memory queues carry over; nothing waits
        except BaseException:
            if pool is not None:
                pool.shutdown(wait=False)
            if prom is not None:
                prom.close()
            raise
        old_transports = old.transports if old is not None else {}
        transports = {
            (ctx.name, u): old_transports.get((ctx.name, u)) or target_transport(u) for ctx, urls in plan for u in urls
        }
        return Runtime(
            cfg,
            base_dir,
            deployments,
            plan,
            rules,
            quality,
            state_file,
            prom,
            acks,
            notifier,
            pool,
            size,
            transports,
            sd,
            outbox,
        )

    def _notifier(self, cfg: Config, outbox: Path | None, base_dir: Path | None, acks: AckStore) -> Notifier:
        """The receivers' notifier, consulting ``acks`` (raises ``ConfigError`` or ``StateError``)."""
        return build_notifier(
            list(cfg.receivers), outbox, self._count_outcome, base_dir=base_dir, suppressed=acks.suppressed
        )

    def _hand_over(self, old: Runtime, cfg: Config, outbox: Path, base_dir: Path | None, acks: AckStore) -> Notifier:
        """A new notifier on the outbox folder the running one holds (one notifier at a time may: it is locked).
        The running one is stopped without a flush — a reload never waits on a receiver; a request in flight is
        abandoned and sent again by the new one (same idempotency key) — what waits stays in its outbox files, which
        the new one reads; if the new one cannot be built, the running one is rebuilt on the same folder and
        config, and the error propagates."""
        old.notifier.close(0.0, grace=0.2)
        try:
            return self._notifier(cfg, outbox, base_dir, acks)
        except BaseException:
            old.notifier = self._notifier(old.cfg, old.outbox, old.base_dir, old.acks)
            log.warning("notify: the new receivers could not start; the running ones were restarted on %s", outbox)
            raise

    def _apply(self, rt: Runtime) -> None:
        """Point the tracker at ``rt`` (cannot fail): its settings, deployments and targets, keeping the
        histories and open recommendations of what stays; and the scrape-error counters of what stays."""
        cfg = rt.cfg
        before = set(self.tracker.deployment_names)
        self.metrics.cycle_interval.set(cfg.scrape_interval)
        self.tracker.configure(
            rt.rules,
            evaluation_window=cfg.evaluation_window,
            scrape_interval=cfg.scrape_interval,
            quality=rt.quality,
            cooldown_seconds=cfg.rules.cooldown,
            model_error_bound=cfg.data_quality.capacity_model_error_bound,
            replica_windows=(cfg.rules.replicas.scale_up_window, cfg.rules.replicas.scale_down_window),
            max_gap_seconds=evaluation_gap_bound(cfg.scrape_interval),
            replica_min_history=float(cfg.rules.replicas.min_history),
            resolve_hold_seconds=cfg.rules.resolve_for,
        )
        self.tracker.set_deployments(rt.plan)
        for d in rt.deployments:
            # source: prometheus counts the instances its query found (_query_prometheus)
            self.tracker.count_replicas(d.spec.name, d.spec.source != "prometheus")
        kept = {(ctx.name, u) for ctx, urls in rt.plan for u in urls}
        names = [d.spec.name for d in rt.deployments]
        self.collector.retain(names, self.clock())  # a removed deployment's series leave /metrics now
        for gone in before - set(names):
            with suppress(KeyError):
                self.metrics.cycle_failures.remove(gone)
        with self._errors_lock:
            self.scrape_errors = {k: v for k, v in self.scrape_errors.items() if (k[0], k[1]) in kept}
            for name, url in kept:
                for reason in c.SCRAPE_ERROR_REASONS:
                    self.scrape_errors.setdefault((name, url, reason), 0)

    # what the rest of the code (CLI, server, tests) reads: the current runtime's parts
    @property
    def cfg(self) -> Config:
        """The running config."""
        return self.runtime.cfg

    @property
    def base_dir(self) -> Path | None:
        """The folder the running config's relative paths are resolved from."""
        return self.runtime.base_dir

    @property
    def acks(self) -> AckStore:
        """The running snooze/ack store (the HTTP API reads it through here, so a reload reaches it)."""
        return self.runtime.acks

    @property
    def notifier(self) -> Notifier:
        """The running notifier."""
        return self.runtime.notifier

    @property
    def prom(self) -> PrometheusSource | None:
        """The running Prometheus source, if any deployment reads one."""
        return self.runtime.prom

    @property
    def state_file(self) -> Path | None:
        """The running state file, if any."""
        return self.runtime.state_file

    @property
    def deployments(self) -> list[_Deployment]:
        """This shard's deployments under the running config."""
        return self.runtime.deployments

    @property
    def lifecycle(self) -> Lifecycle:
        """The rules' lifecycle (open recommendations), kept across reloads."""
        return self.tracker.lifecycle

    @property
    def _pool_size(self) -> int:
        return self.runtime.pool_size

    def reload(self, path: Path) -> tuple[bool, str]:
        """Re-read the config file, as Prometheus does on SIGHUP: on success the new config takes effect
        at once (histories and open recommendations of what stays are kept); on failure — anywhere, the
        ack store and the notifier included — the running runtime stays, untouched, and the message says why.
        Returns ``(ok, message)``.

        Never waits on a scrape, a query or the cycle's I/O: the new runtime is built outside the cycle lock,
        which is taken only for the swap (the running cycle holds it for CPU work only)."""
        with self._reload_lock:
            return self._reload(path)

    def _reload(self, path: Path) -> tuple[bool, str]:
        from advisor.config import load_config
        from advisor.errors import AdvisorError

        try:
            cfg = load_config(path)
            # built beside the running cycle (which holds its lock only for CPU work, never across a scrape):
            # the cycle lock is taken for the swap alone, so a hung target never holds a reload up
            old = self.runtime
            new = self._build_runtime(cfg, path.resolve().parent, old)
            with self._lock:
                self.runtime = new  # the swap: one reference
                self._apply(new)
        except AdvisorError as exc:
            self.metrics.config_reload_success.set(0)
            self.last_reload = (False, str(exc), self.clock())
            log.error("config reload failed; keeping the running config: %s", exc)
            return False, str(exc)
        except Exception as exc:  # a bug must not take the running daemon down with it
            self.metrics.config_reload_success.set(0)
            self.last_reload = (False, f"reload failed: {type(exc).__name__}", self.clock())
            log.exception("config reload failed unexpectedly; keeping the running config")
            return False, f"reload failed: {type(exc).__name__}"
        # only now is the old runtime released (the transports of targets that stay carry over)
        old.close(
            10, keep=frozenset(new.transports.values()), wait=False, close_notifier=old.notifier is not new.notifier
        )
        self.metrics.config_reload_success.set(1)
        self.metrics.config_reload_timestamp.set(self.clock())
        self.last_reload = (True, f"reloaded: {len(new.deployments)} deployment(s)", self.clock())
        log.info("config reloaded from %s: %d deployment(s)", path, len(new.deployments))
        return True, f"reloaded: {len(new.deployments)} deployment(s)"

    def _ensure_pool(self, rt: Runtime) -> None:
        """Grow the workers when file_sd adds targets (one per target, at most 32)."""
        want = _pool_size_for(
            rt.deployments, [(self.tracker.context(d.spec.name), self._urls(d)) for d in rt.deployments]
        )
        if want <= rt.pool_size:
            return
        old = rt.pool
        rt.pool, rt.pool_size = WorkerPool(want), want
        old.shutdown(wait=False)

    def _urls(self, d: _Deployment) -> list[str]:
        return self.tracker.targets(d.spec.name)

    def _refresh_file_sd(self, rt: Runtime) -> None:
        """Re-read ``file_sd`` files whose modification time changed, adding and removing targets."""
        now = sd_mtimes(rt.cfg, rt.base_dir)
        if now == rt.sd_mtimes:
            return
        rt.sd_mtimes = now
        for d in rt.deployments:
            if not d.spec.file_sd:
                continue
            name = d.spec.name
            try:
                urls = resolve_targets(d.spec, rt.base_dir)
            except ConfigError as exc:
                log.error("deployment=%s: file_sd unusable, keeping the current targets: %s", name, exc)
                continue
            except Exception:  # one deployment's discovery must never stop the others' cycle
                log.exception("deployment=%s: file_sd unusable, keeping the current targets", name)
                continue
            gone = set(self.tracker.targets(name)) - set(urls)
            self.tracker.set_targets(name, urls)
            self.tracker.set_context(name, dataclasses.replace(self.tracker.context(name), replicas=max(1, len(urls))))
            for u in gone:
                t = rt.transports.pop((name, u), None)
                if t is not None:
                    t.close()
            with self._errors_lock:
                for u in urls:
                    for reason in c.SCRAPE_ERROR_REASONS:
                        self.scrape_errors.setdefault((name, u, reason), 0)
            log.info("deployment=%s: file_sd now lists %d target(s)", name, len(urls))
        self._ensure_pool(rt)

    # -- steps -------------------------------------------------------------------------------------
    @contextmanager
    def _step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.metrics.step_seconds.labels(step=name).observe(time.perf_counter() - start)

    def _submit_scrapes(self, rt: Runtime) -> list[Future[tuple[Collected, float]]]:
        """Start a scrape of every target that has none running (a target still in flight from an earlier cycle
        is not scraped twice; one whose answer is in and not yet consumed is consumed first, in order); returns
        the futures started now. Each future reports its end to the finished queue (:meth:`_consume`). Call
        with the cycle lock held.

        Each scrape is a :class:`~advisor.collect.CollectJob`, fetched and normalized in one thread (the body
        dropped there): with ``--workers 1`` on the scrape loop (:class:`~advisor.scrape_loop.ScrapeLoop`: every
        plain-``http://`` target without a proxy on one thread; its connects, and any other target by
        :func:`~advisor.collect.collect` over its transport, on the runtime's thread pool), or on the worker
        process its URL hashes to (:class:`~advisor.workers.ProcessWorkers`, ``--workers N``). Either way the result
        is stamped with :attr:`clock` when it is handed on.

        The workers are shared (at most 32 threads a pool), so the scrapes are queued fastest first, by each
        target's last scrape duration (a new target first): targets that hold their scrape to the deadline (more of
        them than workers) never make the others wait behind them, and each target is still asked once per cycle.
        """
        sc = rt.cfg.scrape

        jobs = {
            (d.spec.name, u): CollectJob(
                d.spec.name,
                u,
                d.adapter.engine if d.adapter is not None else "auto",
                d.spec.served_model,
                d.spec.model,
                sc.connect_timeout,
                sc.read_timeout,
                sc.max_bytes,
                sc.sample_limit,
                sc.label_limit,
                self._auto_detected(d, u),
            )
            for d in rt.deployments
            if d.spec.source == "scrape"
            for u in self._urls(d)
        }
        keys = list(jobs)
        self._scrape_seconds = {k: v for k, v in self._scrape_seconds.items() if k in jobs}
        keys.sort(key=lambda k: self._scrape_seconds.get(k, 0.0))
        procs = self._procs
        loop = self._loop
        if procs is not None:
            procs.retain(keys)  # a worker drops the connections of targets no longer listed
        else:
            if loop is None:
                loop = self._loop = ScrapeLoop(self.clock)
            listed = frozenset(keys)
            if listed != self._loop_keys:
                self._loop_keys = listed
                loop.retain(listed)  # the loop drops the connections of targets no longer listed
        started: list[Future[tuple[Collected, float]]] = []
        for key in keys:
            name, u = key
            f = self._inflight.get(key)
            if f is not None and not f.done():
                continue  # a straggler: its result is consumed when it ends
            if f is not None:  # done, its report not consumed yet (it is, or is about to be, in the queue)
                self._consume(rt, self._take_finished(wait_for=f))
            if procs is not None:
                f = self._inflight[key] = procs.submit(jobs[key])
            else:
                assert loop is not None
                f = self._inflight[key] = loop.submit(key, jobs[key], rt.transport(name, u), rt.pool)
            self._report_end(key, f)
            started.append(f)
        return started

    def _report_end(self, key: _Key | None, f: Future[Any]) -> None:
        """Have ``f`` put ``(key, f)`` on the finished queue when it ends (``key`` None: a Prometheus query)."""
        finished = self._finished
        f.add_done_callback(lambda done: finished.put((key, done)))

    def _take_finished(
        self, timeout: float | None = None, wait_for: Future[Any] | None = None
    ) -> list[tuple[_Key | None, Future[Any]]]:
        """The futures that reported their end since the last call, oldest first: waiting at most ``timeout``
        seconds for the first (``None``: not at all), or until ``wait_for``'s report is among them (it is done;
        its callback follows at once)."""
        out: list[tuple[_Key | None, Future[Any]]] = []
        try:
            if wait_for is not None:
                while all(f is not wait_for for _, f in out):
                    out.append(self._finished.get(timeout=1.0))
            elif timeout is not None and timeout > 0:
                out.append(self._finished.get(timeout=timeout))
            while True:
                out.append(self._finished.get_nowait())
        except queue.Empty:
            pass
        return out

    def _consume(self, rt: Runtime, finished: Sequence[tuple[_Key | None, Future[Any]]]) -> None:
        """Normalize the scrapes among ``finished`` (:meth:`_take_finished`) one page at a time, oldest first, each
        page's text dropped once observed. Call with the cycle lock held."""
        self._normalize(rt, self._results(finished))

    def _results(self, finished: Sequence[tuple[_Key | None, Future[Any]]]) -> Iterator[tuple[_Key, Collected, float]]:
        """The scrape results among ``finished``, each taken out of ``_inflight`` as it is handed on."""
        for key, f in finished:
            if key is None:
                continue  # a Prometheus query: it fed the tracker itself
            if self._inflight.get(key) is f:
                del self._inflight[key]
            try:
                res, ts = f.result()
            except Exception as exc:  # collect() never raises for the network: a bug must not stop the others
                name, url = key
                log.error("deployment=%s target=%s: scrape failed: %s", name, redact_url(url), type(exc).__name__)
                res = collect_failed(c.REASON_PARSE_ERROR, f"scrape error: {type(exc).__name__}")
                ts = self.clock()
            self._scrape_seconds[key] = res.duration_seconds
            yield key, res, ts
            del res

    def _normalize(self, rt: Runtime, scraped: Iterable[tuple[_Key, Collected, float]]) -> None:
        """Feed the scrapes' results to the tracker (on the cycle thread, cycle lock held): the page was observed
        where it was fetched (:func:`advisor.collect.collect`); here the engine it was detected as is adopted
        (``engine: auto``) and the snapshot recorded, or the failure. A result for a target a reload or
        ``file_sd`` removed meanwhile is dropped."""
        by_name = {d.spec.name: d for d in rt.deployments if d.spec.source == "scrape"}
        listed: dict[str, set[str]] = {}
        for (name, url), res, ts in scraped:
            d = by_name.get(name)
            if d is None:
                continue
            if name not in listed:
                listed[name] = set(self.tracker.targets(name))
            if url not in listed[name]:
                continue
            self._adopt(d, res.engine, url)
            if (
                res.ok
                and res.snapshot is not None
                and d.adapter is not None
                and res.engine not in (None, d.adapter.engine)
            ):
                # engine: auto read this page as another engine than the one it adopted, in the same batch of scrapes
                # (each job of a deployment not yet detected detects its own): never one deployment's history mixed
                res = dataclasses.replace(
                    res,
                    ok=False,
                    snapshot=None,
                    error_reason=c.REASON_UNRECOGNIZED,
                    error_message=auto_engine_mismatch(res.engine, d.adapter.engine, self._detected_here(d, url)),
                )
            if res.ok and res.snapshot is not None:
                step = self.tracker.observe(name, url, TimedSnapshot(url, ts, res.snapshot, res.duplicate_series))
                if step is not None:
                    _log_clock_step(step)
                continue
            reason, message = res.error_reason, res.error_message
            # a message may quote the page, which may echo the URL: none of its secrets goes further
            message = target_message(url, message)
            changed = self.tracker.fail(name, url, reason, message)
            key = (name, url, reason or c.REASON_PARSE_ERROR)
            with self._errors_lock:  # Prometheus queries run beside this loop
                self.scrape_errors[key] = self.scrape_errors.get(key, 0) + 1
            # a target that stays down is logged once (and again when the reason changes), not every scrape
            (log.warning if changed else log.debug)(
                "deployment=%s target=%s scrape failed: %s (%s)", name, redact_url(url), reason, message
            )

    @staticmethod
    def _detected_here(d: _Deployment, url: str) -> bool:
        """``engine: auto`` detected ``d``'s engine on ``url``'s page (:func:`~advisor.redact.endpoint_key`)."""
        return d.detected_on is not None and endpoint_key(d.detected_on) == endpoint_key(url)

    def _auto_detected(self, d: _Deployment, url: str) -> str | None:
        """A scrape job's ``engine_auto_detected``: ``None`` unless ``d`` runs an engine ``engine: auto`` detected;
        then ``"this"`` when it was detected on ``url``'s page, else ``"other"``."""
        if d.spec.engine != "auto" or d.adapter is None:
            return None
        return "this" if self._detected_here(d, url) else "other"

    def _adopt(self, d: _Deployment, seen: Observation | str | None, url: str | None = None) -> None:
        """``engine: auto``: keep the adapter of the first page an engine was detected on (``seen``: the engine id
        a scrape job detected on target ``url``, or the :class:`~advisor.observe.Observation` of the Prometheus
        source's names)."""
        if d.adapter is not None or seen is None:
            return
        adapter = get_adapter(seen) if isinstance(seen, str) else seen.adapter
        if adapter is not None:
            d.adapter = adapter
            d.detected_on = url
            name = d.spec.name
            self.tracker.set_context(name, sized_for_engine(self.tracker.context(name), d.spec, adapter.engine))
            log.info("deployment=%s: detected engine %s", name, adapter.engine)

    def _prom_error(
        self, rt: Runtime, d: _Deployment, reason: str | None, message: str | None, *, fail_targets: bool = True
    ) -> None:
        """Count and log a failed read of ``d``; with ``fail_targets`` every target of ``d`` fails with it (a
        failed batch fails only its own instances, in ``_finish_read``)."""
        assert rt.cfg.prometheus is not None
        where = redact_url(rt.cfg.prometheus.url)
        name = d.spec.name
        with self._lock:  # queries run beside the cycle: the tracker is touched under its lock
            if self.runtime is not rt:
                return  # a reload replaced the runtime (and maybe removed the deployment) meanwhile
            # nothing discovered yet: show the source itself, with why it failed
            for url in (self.tracker.targets(name) or [where]) if fail_targets else ():
                self.tracker.fail(name, url, reason, message)
        key = (name, where, reason or c.REASON_PARSE_ERROR)
        with self._errors_lock:  # deployments are queried concurrently
            self.scrape_errors[key] = self.scrape_errors.get(key, 0) + 1
        log.warning("deployment=%s prometheus=%s query failed: %s (%s)", name, where, reason, message)

    def _query_prometheus(self, rt: Runtime, d: _Deployment) -> None:
        """``source: prometheus``: one range query per deployment per cycle (one per batch of
        ``prometheus.batch_instances`` instances when the selector matches more), whatever the number of engine
        instances behind the selector; each instance becomes a target with the same history a scrape would build.

        Only the points since the previous complete read are fetched
        (:func:`~advisor.sources.prometheus.incremental_range`: the whole window on the first read, after a
        failure longer than the window, and after a reload) and appended to each target's history as scraped
        points are; once the window is held, by ``/federate`` where the store serves it (:meth:`_read_latest`).
        A read whose answer came more than a window after the time it read up to is not repeated
        (:meth:`_read_since`). The series names (and the engine) and, for batching, the instances are listed
        every 20 cycles."""
        src = rt.prom
        cfg = rt.cfg
        assert src is not None and d.spec.selector is not None and cfg.prometheus is not None
        now = self.clock()
        window = cfg.evaluation_window + cfg.scrape_interval
        self._clock_stepped_back(rt, d, now)
        if d.prom_wanted is None or d.prom_refresh <= 0:
            names = src.metric_names(d.spec.selector, now - window, now)
            if not names.ok:
                self._prom_error(rt, d, names.error_reason, names.error_message)
                return
            found = identify(names.names, d.adapter or "auto")
            if found.adapter is None or (found.error_reason is not None and names.names):
                self._prom_error(rt, d, found.error_reason, f"selector {d.spec.selector}: {found.error_message}")
                return
            with self._lock:
                if self.runtime is not rt:
                    return
                self._adopt(d, found)
            wanted = frozenset(n for n in names.names if found.adapter.wants(n) or n in WORKER_KV_NAMES)
            if wanted:
                listed = src.label_values("instance", d.spec.selector, now - window, now)
                if not listed.ok:
                    self._prom_error(rt, d, listed.error_reason, f"listing instances: {listed.error_message}")
                    return
                many = len(listed.names) > cfg.prometheus.batch_instances
                d.prom_instances = tuple(sorted(listed.names)) if many else None
            d.prom_wanted = wanted
            # an empty listing (the store has not scraped the engines yet, pods still starting) is listed again next
            # cycle: kept for 20 cycles it left the deployment unavailable for 20 intervals after its series came
            d.prom_refresh = 20 if wanted else 1
        d.prom_refresh -= 1
        assert d.adapter is not None
        if not d.prom_wanted:
            self._prom_error(rt, d, c.REASON_UNRECOGNIZED, f"no {d.adapter.engine} series match the selector")
            return
        step = cfg.scrape_interval
        federate = cfg.prometheus.federate and src.federation is not False
        since = self._read_since(rt, d, now, window, federate)
        incremental = since is not None and now - since <= window
        if incremental and federate and self._read_latest(rt, d, now):
            return
        start, end = incremental_range(since, now, window, step)
        seen: set[str] = set()

        def apply(part: PromHistory) -> None:
            with self._lock:  # the tracker is touched under the cycle lock, one answer at a time
                if self.runtime is rt:
                    seen.update(self._apply_groups(d, part.groups, min_gap=MIN_POINT_GAP_STEPS * step))

        if d.prom_instances is None:
            h = src.history(d.spec.selector, d.prom_wanted, start, end, step)
            if h.ok:
                apply(h)
        else:  # each batch is applied as it arrives: the cycle never holds the whole fleet's answer
            batch = cfg.prometheus.batch_instances
            selector, wanted = d.spec.selector, d.prom_wanted
            h = src.history_batches(selector, wanted, start, end, step, d.prom_instances, batch, on_batch=apply)
        self._end_read(rt, d, h, seen, end)

    def _clock_stepped_back(self, rt: Runtime, d: _Deployment, now: float) -> None:
        """Notice the advisor's clock stepping back (a host clock that ran ahead set right, a VM restored): ``now``
        earlier than the last complete read of ``d`` (``prom_until``, the clock then) by more than one scrape
        interval — or, with no read since the start or a reload, than a point held by more than
        :data:`FUTURE_SAMPLE_SECONDS` (the skew a store's clock is allowed). Left alone, the points held from the
        clock's future keep every new point out (each must be newer than the newest held) and never age: the
        targets read ``fresh``, frozen, until the clock passes them. So the step is logged with its size, the
        points after ``now`` are dropped, and the next read fills the window again (as the first read does);
        staleness is then judged on the points read since. A step smaller than one interval costs at most that
        interval's point and is not logged."""
        name = d.spec.name
        tr = self.tracker
        with self._lock:
            if self.runtime is not rt:
                return
            if d.prom_until is not None:
                last, slack = d.prom_until, rt.cfg.scrape_interval
            else:
                newest = (h[-1].timestamp for h in (tr.history(name, u) for u in tr.targets(name)) if h)
                last, slack = max(newest, default=-math.inf), FUTURE_SAMPLE_SECONDS
            if last - now <= slack:
                return
            dropped = 0
            for url in tr.targets(name):
                held = tr.history(name, url)
                if held and held[-1].timestamp > now:
                    kept = [p for p in held if p.timestamp <= now]
                    dropped += len(held) - len(kept)
                    tr.replace_history(name, url, kept)
            d.prom_until = d.prom_answered_late = None
            d.prom_late_logged = False
            d.prom_last.clear()  # the scrapes they showed: a read after the step may show them again
        log.warning(
            "deployment=%s: the clock stepped back %s s (it reads %s, the last read or newest point was at %s): the "
            "%d point(s) held from after now are dropped and the window is read again; targets are judged on the "
            "points read since",
            name,
            f"{last - now:,.0f}",
            rfc3339(now),
            rfc3339(last),
            dropped,
        )

    def _read_since(self, rt: Runtime, d: _Deployment, now: float, window: float, federate: bool) -> float | None:
        """Where the read of ``d`` at ``now`` starts (unix s; ``None``: the whole window): the end of the last
        complete read (``prom_until``, the time it read up to), and the whole window once that is more than
        ``window`` seconds ago (failed cycles, a stalled store) — except when the last read itself is the delay.

        A read whose answer arrived more than one scrape interval after it began (``prom_answered_late``) held
        the next read back by its own duration. When that makes the next read come more than a window after the
        points it read, the next read starts where its answer arrived instead: reading the window again would
        take as long again (a 10,000-instance first read took 496 s against a 5-minute window) and the source would
        never catch up, its answers older than the window each time they arrive. The points between are not
        read: the window then fills one point per cycle, as a scraped target's does after an outage, and its
        coverage (``Evaluation.coverage``) counts the points it lacks. Logged once per deployment.

        Reads that end within their cycle, and gaps longer than the window counted from when a slow answer
        arrived, start as they always did."""
        until, late = d.prom_until, d.prom_answered_late
        if until is None or now - until <= window or late is None or now - late > window:
            return until
        if not d.prom_late_logged:
            d.prom_late_logged = True
            assert rt.cfg.prometheus is not None
            log.warning(
                "deployment=%s prometheus=%s: the last read took %.0f s, and its points are now %.0f s old, more "
                "than the %g s window: reading the window again would take as long and never catch up, so each "
                "cycle now reads only the newest points (%s); the points in between are not read, and the window "
                "fills one point per cycle as when scraping (its coverage counts the points missing)",
                d.spec.name,
                redact_url(rt.cfg.prometheus.url),
                late - until,
                now - until,
                window,
                "/federate" if federate else "query_range from where that read ended",
            )
        return late

    def _read_latest(self, rt: Runtime, d: _Deployment, now: float) -> bool:
        """An incremental read through the store's federation endpoint (``PrometheusSource.latest``): the newest
        sample of each series, one point per target stamped with its scrape's time, appended when newer than the
        target's newest point. Returns ``False`` (nothing read) when the store has no such endpoint (404/405:
        Thanos Querier, Mimir): the caller reads the range instead, and later cycles do not ask again."""
        src, cfg = rt.prom, rt.cfg
        assert src is not None and cfg.prometheus is not None and d.spec.selector is not None
        assert d.prom_wanted is not None
        seen: set[str] = set()

        def apply(part: PromHistory) -> None:
            with self._lock:
                if self.runtime is rt:
                    seen.update(self._apply_groups(d, part.groups, late_scrapes=True))

        if d.prom_instances is None:
            h = src.latest(d.spec.selector, d.prom_wanted)
            if h.ok:
                apply(h)
        else:
            batch = cfg.prometheus.batch_instances
            h = src.latest_batches(d.spec.selector, d.prom_wanted, d.prom_instances, batch, on_batch=apply)
        if not h.ok and not seen and src.federation is False:
            log.info(
                "prometheus=%s has no federation endpoint (HTTP %s): reading ranges (query_range) instead",
                redact_url(cfg.prometheus.url),
                h.status_code,
            )
            return False
        self._end_read(rt, d, h, seen, now)
        return True

    def _end_read(self, rt: Runtime, d: _Deployment, h: PromHistory, seen: set[str], until: float) -> None:
        """After one read of ``d`` (every batch): count and log failures, mark the targets not read, and remember
        ``until`` as the end of the last complete read when every batch answered (``until`` is also when the read
        began: the time its answer arrived is kept when that was more than one scrape interval later,
        :meth:`_read_since`)."""
        if not h.ok and not seen:
            self._prom_error(rt, d, h.error_reason, h.error_message)
            return
        if h.failed:  # some batches failed: their instances fail, the others' points are applied
            message = f"{len(h.failed)} instance(s) not read: {h.error_message}"
            self._prom_error(rt, d, h.error_reason, message, fail_targets=False)
        with self._lock:
            if self.runtime is rt:
                self._log_warnings(rt, d, h.warnings)
                self._finish_read(d, seen, h)
                if h.ok:  # else the next read starts where this one did (points already held are skipped)
                    d.prom_until = until
                    answered = self.clock()
                    d.prom_answered_late = answered if answered - until > rt.cfg.scrape_interval else None

    def _log_warnings(self, rt: Runtime, d: _Deployment, warnings: Sequence[str]) -> None:
        """Log what a read of ``d`` skipped or left out (``PromHistory.warnings``: a point whose scrape time is
        unknown, a repeated series, the API's own warnings …): a warning the read before it gave too at debug
        level, so a lasting condition is said once, not every cycle."""
        assert rt.cfg.prometheus is not None
        where = redact_url(rt.cfg.prometheus.url)
        for w in warnings:
            (log.debug if w in d.prom_warned else log.warning)("deployment=%s prometheus=%s: %s", d.spec.name, where, w)
        d.prom_warned = frozenset(warnings)

    def _apply_history(self, d: _Deployment, h: PromHistory) -> None:
        """Feed one deployment's Prometheus range query result (``PrometheusSource.history``) to the tracker:
        :meth:`_apply_groups`, then :meth:`_finish_read`."""
        self._finish_read(d, self._apply_groups(d, h.groups), h)

    def _apply_groups(
        self, d: _Deployment, groups: Iterable[PromGroup], min_gap: float = 0.0, late_scrapes: bool = False
    ) -> set[str]:
        """Each target's points newer than its history (by more than ``min_gap`` seconds: a point re-read at a
        later evaluation time shows the sample already held) are observed and appended (``Tracker.observe``, as a
        scrape's page is), so a point read twice (the read after a reload or a failed batch, or the newest point
        re-read) is never counted twice; each target's status is set. Returns the targets seen.

        A point showing the same raw scrape as the newest point read before it (``PromGroup.scraped``, kept in
        ``d.prom_last``; within one answer :func:`~advisor.sources.prometheus.histories_from_matrix` already
        dropped them) is not a new observation: skipped, so a store whose scrape lags the reads never shows flat
        counters. Stores that do not say which scrape a point shows: every new point is taken, as before.

        ``late_scrapes`` (``/federate`` reads, whose points are stamped with their scrape's own time): a point showing
        a newer scrape than the newest point held but stamped at or before it is appended stamped ``now``, when it
        was first seen — as a range read stamps a point with the evaluation time it first shows up at. It happens
        after a range read, whose newest point's time is its evaluation time, later than its scrape: a scrape the
        store held late (ingestion delay, a late scrape) falls between the two and was dropped as old, its increase
        then counted in the next interval.

        A target whose part of the answer is unreadable (``PromGroup.error``: a ``/federate`` sample without a
        timestamp) fails alone, named. A target one of whose scrape jobs is down while another is up reads up,
        its status naming the job down (``PromGroup.down_jobs``, :meth:`_down_jobs`).

        A read with no new point for a target leaves the status its newest point gave: a page refused by
        observation (``served_model_not_found`` …) stays refused, not "no samples"."""
        name = d.spec.name
        tr = self.tracker
        assert d.adapter is not None
        seen: set[str] = set()
        now = self.clock()
        for g in groups:
            seen.add(g.target)
            if g.error is not None:  # this target's part of the answer is unreadable: it fails, the others read
                changed = tr.fail(name, g.target, c.REASON_PARSE_ERROR, g.error)
                (log.warning if changed else log.debug)("deployment=%s target=%s: %s", name, g.target, g.error)
                continue
            ahead = max((ts for ts, _ in g.points), default=-math.inf) - now
            if ahead > FUTURE_SAMPLE_SECONDS:
                message = (
                    f"a sample stamped {ahead:,.0f} s ahead of the advisor's clock (a clock set wrong, or a timestamp "
                    "unit?): this read of the target is left out"
                )
                log.warning("deployment=%s target=%s: %s", name, g.target, message)
                tr.fail(name, g.target, c.REASON_PARSE_ERROR, message)
                continue
            held = tr.history(name, g.target)
            newest = held[-1].timestamp + min_gap if held else -math.inf
            last = d.prom_last.get(g.target)
            before = last[0] if last is not None else math.nan
            new = [
                (i, ts if ts > newest else now, expo)
                for i, (ts, expo) in enumerate(g.points)
                if expo
                and not same_scrape(g.scrape_of(i), before)
                and (ts > newest or (late_scrapes and g.scrape_of(i) > before and now > newest))
            ]
            try:
                observed = [
                    (i, ts, observe(expo, d.adapter, d.spec.served_model, configured_model=d.spec.model, strict=True))
                    for i, ts, expo in new
                ]
            except Exception as exc:  # an adapter bug must not stop other targets
                log.exception("deployment=%s target=%s: adapter failed", name, g.target)
                tr.fail(name, g.target, c.REASON_PARSE_ERROR, f"adapter error: {type(exc).__name__}")
                continue
            for _, ts, o in observed:
                if o.snapshot is not None:
                    tr.observe(name, g.target, TimedSnapshot(g.target, ts, o.snapshot))
            last_up = g.up[-1][1] if g.up else 1.0
            ok = bool(tr.history(name, g.target)) and last_up == 1.0
            refused: tuple[str | None, str | None] | None = None
            if observed:
                i, _, o = observed[-1]
                refused = None if o.ok else (o.error_reason, o.error_message)
                d.prom_last[g.target] = (g.scrape_of(i), refused)
            elif last is not None and last_up == 1.0:
                refused = last[1]  # no new point: the newest point's word stands
            down = self._down_jobs(d, g) if ok else None
            if refused is not None:  # the page is there but says no (served_model_not_found, unrecognized)
                tr.set_status(name, g.target, False, *refused)
            elif ok:
                tr.set_status(name, g.target, True, None, down)
            else:
                tr.set_status(name, g.target, False, *prometheus_down(last_up))
        return seen

    def _down_jobs(self, d: _Deployment, g: PromGroup) -> str | None:
        """The note an up target carries when one of its scrape jobs is down while another is up
        (``PromGroup.down_jobs``: its series are read from the job up), logged when it changes; ``None`` without."""
        if not g.down_jobs:
            if d.prom_down.pop(g.target, None) is not None:
                log.info("deployment=%s target=%s: every scrape job is up again", d.spec.name, g.target)
            return None
        jobs = ", ".join(g.down_jobs)
        note = f"scrape job(s) {jobs} report this target down (up == 0); its series are read from the job(s) up"
        if d.prom_down.get(g.target) != g.down_jobs:
            d.prom_down[g.target] = g.down_jobs
            log.warning("deployment=%s target=%s: %s", d.spec.name, g.target, note)
        return note

    def _finish_read(self, d: _Deployment, seen: set[str], h: PromHistory) -> None:
        """After every answer of one read: targets of failed batches fail, targets absent from the answers are
        down, and the deployment's replicas are counted from the targets seen."""
        name = d.spec.name
        tr = self.tracker
        unread = frozenset(h.failed)  # instances of batches that failed
        rt = self.runtime
        if seen and rt is not None and rt.cfg.prometheus is not None:
            # instances found: the store itself, listed while nothing was (``_prom_error``), is no target
            where = redact_url(rt.cfg.prometheus.url)
            if where in tr.targets(name) and where not in seen:
                tr.set_targets(name, [u for u in tr.targets(name) if u != where])
        known = set(tr.targets(name))
        for gone in [u for u in d.prom_last if u not in known and u not in seen]:
            del d.prom_last[gone]
        for gone in [u for u in d.prom_down if u not in known and u not in seen]:
            del d.prom_down[gone]
        for url in tr.targets(name):
            if url in unread:
                tr.fail(name, url, h.error_reason, h.error_message)
            elif url not in seen:
                tr.set_status(name, url, False, c.REASON_HTTP_STATUS, "no series in Prometheus")
        n = sum(
            engines_behind(hist[-1].snapshot) if hist else 1
            for hist in (tr.history(name, u) for u in tr.targets(name) if u in seen)
        )
        tr.set_context(name, dataclasses.replace(tr.context(name), replicas=max(1, n)))

    external_url: str = ""
    """The advisor's URL (``run --web.external-url``): notifications link back to it."""

    def _notify(self, rt: Runtime, transitions: Sequence[Transition], updates: Sequence[Transition] = ()) -> None:
        # updates send nothing: Alertmanager's keep-alives carry the incident's current turn (annotations)
        cycle = [("updated", u.recommendation) for u in updates]
        for tr in transitions:
            if self.on_transition is not None:
                self.on_transition(tr)
            if tr.kind == "opened" and rt.acks.suppressed(tr.recommendation.id, self.clock()):
                continue
            cycle.append((tr.kind, tr.recommendation))
        links = Links(self.external_url, rt.cfg.runbook_base_url)
        # the open set too: Alertmanager keep-alives hold every open incident, also one restored from the state file
        rt.notifier.submit_cycle(cycle, links, self.tracker.lifecycle.open_recommendations())

    def _count_outcome(self, receiver: str, outcome: str, queued: int) -> None:
        if outcome != "queued":
            self.metrics.notifications.labels(receiver=receiver, outcome=outcome).inc()
        else:  # every outcome series from 0 (a worker starts with "queued"): increase() then sees the first failure
            for o in c.NOTIFY_OUTCOMES:
                self.metrics.notifications.labels(receiver=receiver, outcome=o)
        self.metrics.notifications_queued.labels(receiver=receiver).set(queued)

    # -- the cycle ---------------------------------------------------------------------------------
    def scrape_once(self, budget: float | None = None) -> None:
        """Scrape every target and query every ``source: prometheus`` deployment once, then normalize what
        answered (``once`` calls this twice before evaluating).

        ``budget`` (seconds): wait at most this long for the scrapes and queries started now; one still running
        then keeps running and its result is consumed by a later call (the daemon's cycle). ``None``: wait for
        every one (each is bounded by its deadline). A target or deployment whose previous request is still in
        flight is not requested again. The cycle lock is not held while waiting.
        """
        with self._lock:
            rt = self.runtime
            self._round_started = self.clock()
            self._refresh_file_sd(rt)
            self._consume(rt, self._take_finished())  # stragglers of earlier calls first, in the order they ended
            # every scrape and every Prometheus query at once, one worker each: a slow target or selector
            # delays the cycle by its own latency (at most the budget), not by the sum over them
            queries: list[Future[None]] = []
            for d in rt.deployments:
                if d.spec.source != "prometheus":
                    continue
                q = self._prom_inflight.get(d.spec.name)
                if q is not None and not q.done():
                    continue
                q = self._prom_inflight[d.spec.name] = rt.pool.submit(self._query_prometheus_safely, rt, d)
                self._report_end(None, q)
                queries.append(q)
            started = self._submit_scrapes(rt)
        # each page is normalized as it arrives, while the others are still in flight, and dropped once observed
        # (the cycle never holds every body); the tracker is touched on this thread only, under the cycle lock
        live = set(self._inflight.values())  # a scrape whose answer was consumed while submitting is not waited for
        waiting: set[Future[Any]] = {f for f in started if f in live} | {q for q in queries if not q.done()}
        del started, queries, live
        normalizing = 0.0
        began = time.perf_counter()
        end = None if budget is None else time.monotonic() + budget
        while waiting and not self._stopping.is_set():  # stop() cuts the wait short (SIGTERM)
            left = 0.2 if end is None else min(0.2, end - time.monotonic())
            if left <= 0:
                break
            finished = self._take_finished(left)
            if not finished:
                continue
            t0 = time.perf_counter()
            with self._lock:
                self._consume(self.runtime, finished)
            normalizing += time.perf_counter() - t0
            waiting.difference_update(f for _, f in finished)
            del finished
        self.metrics.step_seconds.labels(step="scrape").observe(time.perf_counter() - began - normalizing)
        t0 = time.perf_counter()
        with self._lock:  # what ended meanwhile (a straggler's answer is consumed by a later call)
            self._consume(self.runtime, self._take_finished())
        self.metrics.step_seconds.labels(step="normalize").observe(normalizing + time.perf_counter() - t0)

    def _query_prometheus_safely(self, rt: Runtime, d: _Deployment) -> None:
        try:
            self._query_prometheus(rt, d)
        except Exception as exc:  # one deployment's source must never stop the others
            log.exception("deployment=%s: the prometheus source failed", d.spec.name)
            self._prom_error(rt, d, c.REASON_PARSE_ERROR, f"source error: {type(exc).__name__}")

    def evaluate_once(
        self, window_seconds: float | None = None, as_of_round: bool = False, scrapes_per_target: int | None = None
    ) -> CycleResult:
        """Evaluate, publish and notify from the history gathered so far (over ``window_seconds``,
        default the configured evaluation window).

        ``scrapes_per_target``: how many scrapes of each target the evaluation expects, the denominator of
        coverage (``once``: the 2 rounds of :meth:`scrape_once` it ran); ``None`` (the daemon): as many as the
        window holds at ``scrape_interval``.

        Staleness is measured now from each target's own newest sample (a target with no new sample for
        ``stale_after_intervals`` intervals is stale, however many cycles ran or were skipped meanwhile).
        ``as_of_round``: measure it from when the last :meth:`scrape_once` began instead (``once``, whose
        synchronous rounds wait for every target: a slow one must not age the others' samples)."""
        with self._lock:
            rt = self.runtime
            now = self.clock()
            with self._step("evaluate"):
                tick = self.tracker.evaluate(
                    now,
                    window_seconds or rt.cfg.evaluation_window,
                    self._round_started if as_of_round else None,
                    step=self._step,
                    scrapes_per_target=scrapes_per_target,
                )
            self._log_tick(rt, tick)
            result = CycleResult(now, tick.results, dict(self.scrape_errors))
            with self._step("publish"):
                self.result = result
                self.collector.publish(result)
            # crash-consistent with the outbox (advisor.state): the open set and this cycle's transitions in one
            # atomic write first, then the outbox, then the transitions cleared; a restart re-submits what was
            # written and not cleared, under the same ids and idempotency keys
            ahead = bool(tick.transitions) and self._persist(rt, now, tick.transitions)
            if tick.transitions and FAULT_POINT == FAULT_BETWEEN_STATE_AND_OUTBOX:
                _die_here()
            with self._step("notify"):
                self._notify(rt, tick.transitions, tick.updates)
            if tick.transitions and FAULT_POINT == FAULT_BETWEEN_OUTBOX_AND_STATE:
                _die_here()
            if ahead:
                self._persist(rt, now, ())
            self.metrics.cycles.inc()
            self.last_progress = now
            return result

    def _persist(self, rt: Runtime, now: float, notifying: Sequence[Transition]) -> bool:
        """Write the open recommendations and ``notifying`` (the transitions being handed to the notifier) to the
        state file; ``False`` when there is none or it cannot be written (logged, counted; they stay in memory)."""
        if rt.state_file is None:
            return False
        with self._step("persist"):
            try:
                save_state(
                    rt.state_file,
                    self.tracker.lifecycle.open_recommendations(),
                    now,
                    [(t.kind, t.recommendation) for t in notifying],
                )
            except StateError as exc:
                self.metrics.cycle_failures.labels(deployment="(state file)").inc()
                log.error("could not persist open recommendations; they stay in memory: %s", exc)
                return False
        return True

    def _log_tick(self, rt: Runtime, tick: Tick) -> None:
        """What the tracker reported that an operator reads in the log (or on the console)."""
        for name, exc in tick.failures:
            log.error("deployment=%s: evaluation failed; skipped this cycle", name, exc_info=exc)
            self.metrics.cycle_failures.labels(deployment=name).inc()
        bound = rt.cfg.data_quality.capacity_model_error_bound
        for name, error, mismatch in tick.model_errors:
            if mismatch is not None and mismatch.definite:  # the cause is known: say it, not the list to check
                log.warning(
                    "deployment=%s: the capacity pass predicts %+.0f%% vs the engine's reported KV pool (bound "
                    "±%.0f%%): %s; its predictions are withheld meanwhile",
                    name,
                    error * 100,
                    bound * 100,
                    mismatch.note(),
                )
                continue
            log.warning(
                "deployment=%s: the capacity pass predicts %+.0f%% vs the engine's reported KV pool "
                "(bound ±%.0f%%); rules use the engine's number — check model, GPU, dtype, "
                "gpu_memory_utilization and max_num_seqs (it sizes vLLM's activation peak) in the config",
                name,
                error * 100,
                bound * 100,
            )
        if tick.restarts:
            _log_restarts(tick.restarts, evaluation_gap_bound(rt.cfg.scrape_interval))
        for update in tick.updates:  # shown, never notified: the alert is unchanged
            if self.on_transition is not None:
                self.on_transition(update)  # the console line (the log would repeat it on stderr)
            else:
                log.info("%s", format_transition(update))

    def run_once(self, budget: float | None = None) -> CycleResult:
        """One whole cycle: scrape → normalize → evaluate → rules → publish → notify.

        ``budget``: how long the scrape step may wait (see :meth:`scrape_once`; ``None``: every target, up to its
        deadline). Sets ``advisor_cycle_duration_seconds`` (tick to last deployment published) and
        ``advisor_cycle_last_success_timestamp_seconds``."""
        start = time.monotonic()
        self.scrape_once(budget)
        result = self.evaluate_once()
        self.metrics.cycle_duration.set(time.monotonic() - start)
        self.metrics.cycle_last_success.set(self.clock())
        return result

    def run_cycle(self) -> CycleResult:
        """The daemon's cycle: :meth:`run_once` waiting for scrapes at most :data:`CYCLE_WAIT_SHARE` of the
        interval (and no longer than the scrape deadline), so the slowest target never delays the others."""
        cfg = self.cfg
        deadline = cfg.scrape.connect_timeout + cfg.scrape.read_timeout
        if cfg.prometheus is not None:
            deadline = max(deadline, cfg.prometheus.connect_timeout + cfg.prometheus.read_timeout)
        return self.run_once(min(deadline, CYCLE_WAIT_SHARE * cfg.scrape_interval))

    def unhealthy_reason(self, now: float, intervals: int = STALL_INTERVALS) -> str | None:
        """Why ``/healthz`` fails, or ``None`` when a cycle completed within ``intervals`` scrape intervals plus
        :data:`HEALTH_SLACK_SECONDS`. Before the first cycle completes, the time counts from start-up (a first
        cycle that never ends is a failure too). A scrape worker process that is down (dead, not restarted yet:
        :meth:`advisor.workers.ProcessWorkers.down_reason`) fails it too."""
        bound = intervals * self.cfg.scrape_interval + HEALTH_SLACK_SECONDS
        since = self.last_progress if self.last_progress is not None else self.started
        age = now - since
        down = self._procs.down_reason() if self._procs is not None else None
        if down is not None:
            return down
        if age <= bound:
            return None
        if self.last_progress is None:
            return (
                f"evaluation loop stalled: no evaluation cycle completed in {age:.0f}s since start-up "
                f"(bound {bound:g}s)"
            )
        return f"evaluation loop stalled: no evaluation cycle completed for {age:.0f}s (bound {bound:g}s)"

    def healthy(self, now: float, intervals: int = STALL_INTERVALS) -> bool:
        """True when a cycle completed within ``intervals`` scrape intervals plus slack, counting from start-up
        before the first (see :meth:`unhealthy_reason`)."""
        return self.unhealthy_reason(now, intervals) is None

    def stop(self) -> None:
        """Stop waiting for scrapes and queries (SIGTERM): the running cycle evaluates what answered and ends;
        a request still running is abandoned to its deadline."""
        self._stopping.set()

    def close(self, timeout: float = SHUTDOWN_FLUSH_SECONDS) -> None:
        """Flush notifications (for at most ``timeout`` s: a stop stays below the unit's ``TimeoutStopSec``; what
        is left waits in the outbox) and release threads and sessions, never waiting for a scrape still running."""
        self.stop()
        if self._procs is not None:
            self._procs.close()
        if self._loop is not None:
            self._loop.close()
        rt = self.runtime
        rt.notifier.close(timeout)
        rt.close(timeout, wait=False, close_notifier=False)
