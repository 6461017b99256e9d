"""Worker processes: the daemon's scrapes on every core it may use (``capacity-advisor run --workers N``).

The cycle is bound to one core by the GIL; with ``--workers N`` (N > 1) the scrape-and-normalize half of it
(:func:`advisor.collect.collect`) runs in N child processes, each with its own scrape loop
(:class:`~advisor.scrape_loop.ScrapeLoop`: plain-http targets on one thread, as the parent's in-process path), its own
thread pool (connects, and the targets the loop leaves to their transport) and its own transports (one keep-alive
connection per target). The parent keeps everything else — the tracker, the rules, the notifier,
the HTTP server — and hands each target's :class:`~advisor.collect.CollectJob` to the worker its URL hashes to
(:func:`worker_for`: the same stable hash as ``--shard``, :func:`advisor.assembly.in_shard`), so a target always
meets the same worker and its connection stays warm. Results come back as they complete, through one pipe per
worker, and complete :class:`concurrent.futures.Future` objects on a receiver thread, so the daemon's deadlines,
stragglers, fastest-first ordering and half-interval wait (:meth:`advisor.service.Service.scrape_once`) work as
with threads.

Jobs carry every per-target setting, so a reload reaches the workers with no message of its own; the parent
tells each worker which targets it still has (``retain``), and the connections of the others are closed.

A worker that dies (killed, crashed) is noticed at once (its pipe closes): the targets it had in flight fail with a
message naming it and saying it is being restarted (reason ``connection_refused``: the connection to the target
was lost; their deployments show ``unavailable``), and it is restarted — at most :data:`RESTART_BURST` times in
:data:`RESTART_WINDOW_SECONDS`, then as soon as that allows, with ``/healthz`` failing meanwhile
(:meth:`ProcessWorkers.down_reason`). Workers are started with the ``spawn`` method (the daemon has threads: it is
never forked) and exit when the parent does: a stop message on :meth:`ProcessWorkers.close`, and the parent's end
of the pipe closing (or the parent pid changing) if it dies without one.

How many: :func:`usable_cpus` — the CPUs this process may run on (``sched_getaffinity``), capped by the cgroup's
CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``), never ``os.cpu_count()`` (the host's).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor import conventions as c
from advisor.collect import Collected, CollectJob, failed
from advisor.http_edge import ClosableTransport, target_transport
from advisor.scrape_loop import ScrapeLoop

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from advisor.exporter import SelfMetrics

log = logging.getLogger(__name__)

RESTART_BURST = 5
"""A dead worker is restarted at once at most this many times within :data:`RESTART_WINDOW_SECONDS`; after that
the next restart waits until the oldest of them leaves the window (a worker that dies on start-up must not spin)."""
RESTART_WINDOW_SECONDS = 60.0
THREADS_PER_WORKER = 32
"""Scrape threads of one worker process, started as needed (the in-process pool's bound,
:func:`advisor.service._pool_size_for`)."""
STOP_GRACE_SECONDS = 3.0
""":meth:`ProcessWorkers.close` waits this long for the workers to exit on their own before killing them."""
READY_TIMEOUT_SECONDS = 30.0
"""How long start-up waits for the workers' first "ready" (a spawned interpreter imports the scrape path first)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")

_PARENTS_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals a worker ignores: the daemon's to handle (:func:`worker_main`)."""

_Key = tuple[str, str]
"""``(deployment, target URL)``: a worker's transport key."""


# -- how many ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CpuBudget:
    """The CPUs this process may use.

    Attributes:
        cpus: whole CPUs, at least 1: ``affinity`` capped by ``ceil(quota)``.
        affinity: CPUs in the process's affinity mask (``os.sched_getaffinity(0)``).
        quota: the cgroup's CPU quota in CPUs (quota / period), ``None`` when unlimited or unknown.
        source: where the quota came from (``cgroup cpu.max``, ``cgroup v1 cpu.cfs_quota_us``), or why none applies.
    """

    cpus: int
    affinity: int
    quota: float | None
    source: str

    def describe(self) -> str:
        """For the start-up log line, e.g. ``cpus allowed by affinity 2, cgroup cpu.max unlimited``."""
        quota = "unlimited" if self.quota is None else f"{self.quota:g} CPUs"
        return f"cpus allowed by affinity {self.affinity}, {self.source} {quota}"


def parse_cpu_max(text: str) -> float | None:
    """A cgroup v2 ``cpu.max`` (``"$MAX $PERIOD"``, microseconds; ``max`` = no limit) as CPUs.

    ``"max 100000"`` → ``None``; ``"150000 100000"`` → ``1.5``. Source: the kernel's cgroup-v2 documentation
    (Documentation/admin-guide/cgroup-v2.rst, "cpu.max").

    Raises:
        ValueError: the text is not two fields of that shape.
    """
    fields = text.split()
    if len(fields) == 1:  # "$MAX" alone: the period is the default
        fields.append("100000")
    if len(fields) != 2:
        raise ValueError(f"cpu.max: expected '$MAX $PERIOD', got {text.strip()!r}")
    if fields[0] == "max":
        return None
    quota, period = int(fields[0]), int(fields[1])
    if quota <= 0 or period <= 0:
        raise ValueError(f"cpu.max: expected positive numbers, got {text.strip()!r}")
    return quota / period


def parse_cfs(quota_text: str, period_text: str) -> float | None:
    """cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` as CPUs (a quota of ``-1`` = no limit → ``None``).

    Raises:
        ValueError: either is not an integer, or the period is not positive.
    """
    quota, period = int(quota_text.strip()), int(period_text.strip())
    if quota < 0:
        return None
    if period <= 0:
        raise ValueError(f"cpu.cfs_period_us: expected a positive number, got {period_text.strip()!r}")
    return quota / period


def _ancestors(root: Path, rel: str) -> list[Path]:
    """``root/rel`` and every folder above it up to ``root`` (a quota set on a parent cgroup applies too)."""
    parts = [p for p in rel.strip().split("/") if p]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def cgroup_quota(
    cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP
) -> tuple[float | None, str]:
    """The tightest CPU quota over this process's cgroup and its ancestors, in CPUs, and where it came from.

    cgroup v2 (``cgroup_root`` holds ``cgroup.controllers``): the ``0::/path`` line of ``proc_self_cgroup``,
    ``cpu.max`` under ``cgroup_root``. cgroup v1 (or hybrid): the
    line whose controllers include ``cpu``, ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` under the ``cpu``
    hierarchy's mount (``cpu``, ``cpu,cpuacct`` or ``cpuacct,cpu``). In a container the path listed may be the
    host's; the mount's own root is read too. Unreadable files count as no limit.

    Returns:
        ``(quota, source)``: ``quota`` ``None`` when no limit applies or none can be read.
    """
    try:
        lines = proc_self_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    best: float | None = None
    if (cgroup_root / "cgroup.controllers").exists():  # the unified (v2) hierarchy is mounted there
        v2 = [ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")]
        for folder in _ancestors(cgroup_root, v2[0] if v2 else "/"):
            try:
                q = parse_cpu_max((folder / "cpu.max").read_text())
            except (OSError, ValueError):
                continue
            if q is not None and (best is None or q < best):
                best = q
        return best, "cgroup cpu.max"
    v1 = [ln.split(":", 2)[2] for ln in lines if ln.count(":") >= 2 and "cpu" in ln.split(":", 2)[1].split(",")]
    source = "cgroup v1 cpu.cfs_quota_us"
    if not v1:
        return None, "cgroup (none found)"
    for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        base = cgroup_root / mount
        if not base.is_dir():
            continue
        for folder in _ancestors(base, v1[0]):
            try:
                q = parse_cfs((folder / "cpu.cfs_quota_us").read_text(), (folder / "cpu.cfs_period_us").read_text())
            except (OSError, ValueError):
                continue
            if q is not None and (best is None or q < best):
                best = q
        break
    return best, source


def usable_cpus(
    affinity: int | None = None, cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP
) -> CpuBudget:
    """The CPUs this process may use: ``affinity`` (default ``len(os.sched_getaffinity(0))``) capped by the cgroup's
    quota rounded up (:func:`cgroup_quota`), at least 1 — never ``os.cpu_count()``, which counts the host's.

    Example: affinity 2 and ``cpu.max`` ``50000 100000`` (half a CPU) → 1; ``150000 100000`` → 2; ``max`` → 2.
    """
    if affinity is None:
        try:
            affinity = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not Linux: no affinity to read; one CPU is the safe answer
            affinity = 1
    quota, source = cgroup_quota(cgroup_root, proc_self_cgroup)
    cpus = affinity if quota is None else min(affinity, math.ceil(quota - 1e-9))
    return CpuBudget(max(1, cpus), affinity, quota, source)


@functools.lru_cache(maxsize=1 << 16)
def worker_for(url: str, workers: int) -> int:
    """The worker (0 … ``workers - 1``) a target's URL goes to: the first 8 bytes of its SHA-256, big-endian, modulo
    ``workers`` — the hash of :func:`advisor.assembly.in_shard` (Prometheus's ``hashmod``), so one URL always meets
    the same worker (and its warm connection) across cycles and reloads. Memoized (asked twice per target per
    cycle)."""
    if workers <= 1:
        return 0
    return int.from_bytes(hashlib.sha256(url.encode()).digest()[:8], "big") % workers


# -- the parent's side ---------------------------------------------------------------------------------------
@dataclass
class _Slot:
    """One worker: its current process and pipe, what it has in flight, its restart history."""

    index: int
    lock: threading.Lock
    outbox: queue.SimpleQueue[tuple[int, Any]]  # (generation, message) for the sender thread
    proc: BaseProcess | None = None
    conn: Connection | None = None
    generation: int = 0
    up: bool = False
    inflight: dict[int, tuple[Future[tuple[Collected, float]], CollectJob]] | None = None
    next_id: int = 0
    down_message: str = ""
    restarts: int = 0
    restart_times: deque[float] | None = None
    cpu_last: float = 0.0
    retained: frozenset[_Key] | None = None
    ready: threading.Event = field(default_factory=threading.Event)  # the first process said it is ready


class ProcessWorkers:
    """N worker processes running :func:`advisor.collect.collect`; :meth:`submit` returns a future as
    :class:`advisor.service.WorkerPool` does, completed with ``(Collected, clock())`` when the result arrives.

    Thread-safe. Started in the constructor; :meth:`close` stops them (no orphans). ``metrics``: the advisor's self
    metrics (``advisor_workers``, ``advisor_worker_up``, ``advisor_worker_restarts_total``,
    ``advisor_worker_cpu_seconds_total``, by ``worker``).

    Raises:
        ValueError: ``workers`` < 2 (one worker is the in-process thread pool, not this).
    """

    def __init__(
        self,
        workers: int,
        clock: Callable[[], float] = time.time,
        metrics: SelfMetrics | None = None,
        threads: int = THREADS_PER_WORKER,
        restart_burst: int = RESTART_BURST,
        restart_window: float = RESTART_WINDOW_SECONDS,
    ) -> None:
        if workers < 2:
            raise ValueError(f"ProcessWorkers needs at least 2 workers, got {workers}")
        self.n = workers
        self._clock = clock
        self._metrics = metrics
        self._threads = threads
        self._burst = restart_burst
        self._window = restart_window
        self._closing = threading.Event()
        self._ctx = multiprocessing.get_context("spawn")  # the daemon has threads: never fork it
        root = logging.getLogger()
        self._log_level = root.getEffectiveLevel()
        self._log_json = any(type(h.formatter).__name__ == "JSONFormatter" for h in root.handlers)
        self._slots = [
            _Slot(i, threading.Lock(), queue.SimpleQueue(), inflight={}, restart_times=deque()) for i in range(workers)
        ]
        if metrics is not None:
            metrics.workers.set(workers)
        self._threads_run: list[threading.Thread] = []
        try:
            for slot in self._slots:
                self._start(slot)
        except BaseException:
            self.close(0.0)
            raise
        for slot in self._slots:
            for target, name in ((self._supervise, "worker-recv"), (self._send, "worker-send")):
                t = threading.Thread(target=target, args=(slot,), name=f"{name}_{slot.index}", daemon=True)
                t.start()
                self._threads_run.append(t)

    # -- lifecycle
    def _start(self, slot: _Slot) -> None:
        """Start a process for ``slot`` (its pipe made first; the child's end closed here once it holds it)."""
        mine, theirs = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=worker_main,
            args=(theirs, slot.index, os.getpid(), self._log_level, self._log_json, self._threads),
            name=f"advisor-worker-{slot.index}",
            daemon=True,
        )
        proc.start()
        theirs.close()
        with slot.lock:
            slot.proc, slot.conn = proc, mine
            slot.generation += 1
            slot.up = True
            slot.cpu_last = 0.0
            slot.retained = None
        if self._metrics is not None:
            self._metrics.worker_up.labels(worker=str(slot.index)).set(1)
            self._metrics.worker_restarts.labels(worker=str(slot.index))
            self._metrics.worker_cpu.labels(worker=str(slot.index))
        log.info("worker=%d pid=%s started", slot.index, proc.pid)

    def _supervise(self, slot: _Slot) -> None:
        """The slot's receiver: complete futures as results arrive; when the pipe closes, handle the death and
        restart (within the restart budget), until :meth:`close`."""
        while not self._closing.is_set():
            conn = slot.conn
            assert conn is not None
            try:
                while True:
                    self._receive(slot, conn.recv())
            except (EOFError, OSError):
                pass
            except Exception:  # a garbled message: treat the worker as broken
                log.exception("worker=%d: unreadable message; restarting it", slot.index)
            if self._closing.is_set():
                return
            self._died(slot)
            while not self._closing.is_set():
                wait = self._restart_wait(slot)
                if wait <= 0:
                    break
                if "budget used up" not in slot.down_message:
                    slot.down_message = (
                        f"worker {slot.index} is down: restart budget used up ({self._burst} restarts within "
                        f"{self._window:g}s); next restart in {wait:.0f}s"
                    )
                    log.error("%s", slot.down_message)
                self._closing.wait(min(wait, 1.0))
            if self._closing.is_set():
                return
            try:
                self._start(slot)
            except Exception as exc:  # cannot even spawn: count it as a restart and try again later
                log.error("worker=%d: could not be restarted: %s", slot.index, exc)
                assert slot.restart_times is not None
                slot.restart_times.append(time.monotonic())
                continue
            slot.restarts += 1
            assert slot.restart_times is not None
            slot.restart_times.append(time.monotonic())
            if self._metrics is not None:
                self._metrics.worker_restarts.labels(worker=str(slot.index)).inc()
            log.warning(
                "worker=%d restarted (pid %s; %d restart(s) so far)",
                slot.index,
                slot.proc and slot.proc.pid,
                slot.restarts,
            )

    def _restart_wait(self, slot: _Slot) -> float:
        """Seconds until ``slot`` may be restarted within the budget (≤ 0: now)."""
        times = slot.restart_times
        assert times is not None
        now = time.monotonic()
        while times and now - times[0] > self._window:
            times.popleft()
        if len(times) < self._burst:
            return 0.0
        return times[0] + self._window - now

    def _died(self, slot: _Slot) -> None:
        """The worker's pipe closed: reap the process, fail what it had in flight, mark it down."""
        proc = slot.proc
        how = "exited"
        if proc is not None:
            proc.join(1.0)
            if proc.is_alive():  # the pipe broke but the process lives (it should not): make sure it is gone
                proc.kill()
                proc.join(1.0)
            code = proc.exitcode
            if code is not None and code < 0:
                try:
                    how = f"was killed by {signal.Signals(-code).name}"
                except ValueError:
                    how = f"was killed by signal {-code}"
            elif code is not None:
                how = f"exited with status {code}"
        restart = "it is being restarted" if self._restart_wait(slot) <= 0 else "its restart budget is used up"
        message = f"scrape worker {slot.index} (pid {proc.pid if proc else '?'}) {how}; {restart}"
        with slot.lock:
            slot.up = False
            slot.down_message = message
            assert slot.inflight is not None
            lost = list(slot.inflight.values())
            slot.inflight.clear()
            if slot.conn is not None:
                slot.conn.close()
        if self._metrics is not None:
            self._metrics.worker_up.labels(worker=str(slot.index)).set(0)
        log.error("worker=%d: %s; %d target(s) in flight fail", slot.index, message, len(lost))
        for f, _ in lost:
            self._complete(f, failed(c.REASON_CONNECTION_REFUSED, message))

    def close(self, timeout: float = STOP_GRACE_SECONDS) -> None:
        """Stop every worker: a stop message, ``timeout`` seconds to exit, then SIGKILL; futures still in flight are
        failed. Idempotent."""
        self._closing.set()
        for slot in self._slots:
            slot.outbox.put((slot.generation, ("stop",)))
        end = time.monotonic() + timeout
        for slot in self._slots:
            proc = slot.proc
            if proc is None:
                continue
            proc.join(max(0.0, end - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        for slot in self._slots:
            with slot.lock:
                slot.up = False
                assert slot.inflight is not None
                lost = list(slot.inflight.values())
                slot.inflight.clear()
                if slot.conn is not None:
                    slot.conn.close()
            for f, _ in lost:
                self._complete(f, failed(c.REASON_CONNECTION_REFUSED, "the advisor is stopping"))

    # -- work
    def submit(self, job: CollectJob) -> Future[tuple[Collected, float]]:
        """Hand ``job`` to the worker its URL hashes to; the future completes with ``(result, clock())``. A worker
        that is down completes it at once with the reason it is down (``connection_refused``)."""
        slot = self._slots[worker_for(job.url, self.n)]
        f: Future[tuple[Collected, float]] = Future()
        f.set_running_or_notify_cancel()
        with slot.lock:
            if slot.up and not self._closing.is_set():
                assert slot.inflight is not None
                slot.next_id += 1
                slot.inflight[slot.next_id] = (f, job)
                slot.outbox.put((slot.generation, ("job", slot.next_id, job)))
                return f
            message = slot.down_message or f"scrape worker {slot.index} is stopped"
        self._complete(f, failed(c.REASON_CONNECTION_REFUSED, message))
        return f

    def retain(self, keys: Iterable[_Key]) -> None:
        """The targets listed now (each worker is told its own, when they change): a worker closes the connections
        of the others (a reload or ``file_sd`` removed them)."""
        mine: list[set[_Key]] = [set() for _ in self._slots]
        for key in keys:
            mine[worker_for(key[1], self.n)].add(key)
        for slot, ks in zip(self._slots, mine, strict=True):
            frozen = frozenset(ks)
            with slot.lock:
                if slot.retained == frozen or not slot.up:
                    continue
                slot.retained = frozen
                slot.outbox.put((slot.generation, ("retain", frozen)))

    def _send(self, slot: _Slot) -> None:
        """The slot's sender: what :meth:`submit` and :meth:`retain` queued, batched into one message per wake-up
        (never blocking the cycle thread on a full pipe)."""
        while True:
            batch = [slot.outbox.get()]
            while True:
                try:
                    batch.append(slot.outbox.get_nowait())
                except queue.Empty:
                    break
            with slot.lock:
                gen, conn = slot.generation, slot.conn
            msgs = [m for g, m in batch if g == gen]  # what was queued for a dead incarnation is dropped
            if conn is not None and msgs:
                with suppress(OSError, ValueError):  # the receiver sees the pipe close and handles the death
                    conn.send(msgs)
            if any(m[0] == "stop" for _, m in batch):
                return

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> bool:
        """Block until every worker has imported what it runs and said so (at most ``timeout`` seconds), so that
        the first cycle's scrapes are not spent waiting on interpreters starting; whether all did."""
        end = time.monotonic() + timeout
        return all(s.ready.wait(max(0.0, end - time.monotonic())) for s in self._slots)

    def _receive(self, slot: _Slot, message: tuple[Any, ...]) -> None:
        """``("results", [(id, Collected), …], cpu_seconds)`` or ``("ready", [], cpu_seconds)`` from a worker."""
        kind, results, cpu = message
        if kind == "ready":
            slot.ready.set()
        done: list[tuple[Future[tuple[Collected, float]], Collected]] = []
        with slot.lock:
            assert slot.inflight is not None
            for job_id, res in results:
                entry = slot.inflight.pop(job_id, None)
                if entry is not None:
                    done.append((entry[0], res))
            delta = max(0.0, cpu - slot.cpu_last)
            slot.cpu_last = max(slot.cpu_last, cpu)
        if self._metrics is not None and delta:
            self._metrics.worker_cpu.labels(worker=str(slot.index)).inc(delta)
        for f, res in done:
            self._complete(f, res)

    def _complete(self, f: Future[tuple[Collected, float]], res: Collected) -> None:
        if not f.done():
            f.set_result((res, self._clock()))

    # -- what the daemon reports
    def down_reason(self) -> str | None:
        """Why ``/healthz`` fails: a worker that is down (dead and not restarted yet), else ``None``."""
        down = [s.down_message for s in self._slots if not s.up]
        return "; ".join(down) if down and not self._closing.is_set() else None

    def pids(self) -> list[int | None]:
        """Each worker's current pid (``None``: not running)."""
        return [s.proc.pid if s.proc is not None and s.up else None for s in self._slots]

    def restarts(self) -> list[int]:
        """How many times each worker was restarted."""
        return [s.restarts for s in self._slots]


# -- the worker's side ---------------------------------------------------------------------------------------
def worker_main(conn: Connection, index: int, parent: int, log_level: int, log_json: bool, threads: int) -> None:
    """A worker process: run the jobs the parent sends on its scrape loop (the rest on a thread pool), each over
    the target's own transport, and send the results back in batches with the process's CPU seconds. Exits on
    ``stop``, when the parent's end of the pipe closes, or when the parent pid changes (the parent died). SIGINT,
    SIGTERM and SIGHUP are the parent's to handle: a terminal's Ctrl-C reaches the whole process group and
    systemd's stop (``KillMode`` ``control-group``) the whole cgroup, and a worker that died of them would be
    restarted by a parent that is stopping; the parent stops its workers itself, and they exit when it is gone
    (SIGKILL still kills one)."""
    for sig in _PARENTS_SIGNALS:  # from here on (a signal during the imports before it still kills the worker)
        signal.signal(sig, signal.SIG_IGN)
    _worker_logging(log_level, log_json)
    transports: dict[_Key, ClosableTransport] = {}
    tlock = threading.Lock()
    results: queue.SimpleQueue[tuple[int, Collected] | None] = queue.SimpleQueue()
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"worker{index}")

    def transport(job: CollectJob) -> ClosableTransport:
        key = (job.deployment, job.url)
        with tlock:
            t = transports.get(key)
            if t is None:
                t = transports[key] = target_transport(job.url)
            return t

    # plain-http targets are scraped and observed on one thread, as the parent's in-process path does (the rest
    # through their transport on the pool): advisor.scrape_loop
    loop = ScrapeLoop(time.time)

    def run(job_id: int, job: CollectJob) -> None:
        def done(f: Future[tuple[Collected, float]]) -> None:
            exc = f.exception()
            if exc is None:
                results.put((job_id, f.result()[0]))
                return
            log.error("worker=%d deployment=%s: scrape failed", index, job.deployment, exc_info=exc)
            results.put((job_id, failed(c.REASON_PARSE_ERROR, f"scrape error: {type(exc).__name__}")))

        try:
            loop.submit((job.deployment, job.url), job, transport(job), pool).add_done_callback(done)
        except Exception as exc:  # a bug must not lose the job
            log.exception("worker=%d deployment=%s: scrape failed", index, job.deployment)
            results.put((job_id, failed(c.REASON_PARSE_ERROR, f"scrape error: {type(exc).__name__}")))

    def send() -> None:
        while True:
            first = results.get()
            if first is None:
                return
            batch = [first]
            while True:
                try:
                    item = results.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    return
                batch.append(item)
            try:
                conn.send(("results", batch, time.process_time()))
            except (OSError, ValueError):
                os._exit(0)  # the parent is gone

    conn.send(("ready", [], time.process_time()))  # before the sender thread: one writer on the pipe at a time
    sender = threading.Thread(target=send, name="worker-send", daemon=True)
    sender.start()
    try:
        while True:
            if not conn.poll(1.0):
                if os.getppid() != parent:
                    return
                continue
            try:
                messages: Sequence[tuple[Any, ...]] = conn.recv()
            except (EOFError, OSError):
                return
            for msg in messages:
                if msg[0] == "job":
                    run(msg[1], msg[2])
                elif msg[0] == "retain":
                    keep: frozenset[_Key] = msg[1]
                    loop.retain(keep)  # the loop drops the connections of targets no longer listed
                    with tlock:
                        gone = [k for k in transports if k not in keep]
                        dropped = [transports.pop(k) for k in gone]
                    for t in dropped:
                        _close(t)
                elif msg[0] == "stop":
                    return
    finally:
        for t in list(transports.values()):
            _close(t)
        for h in logging.getLogger().handlers:
            h.flush()
        os._exit(0)  # running scrapes are abandoned to their deadlines; nothing here needs an orderly exit


def _close(t: ClosableTransport) -> None:
    try:
        t.close()
    except Exception:  # closing a connection must never take the worker down
        log.debug("closing a transport failed", exc_info=True)


def _worker_logging(level: int, json_format: bool) -> None:
    """The parent's log format and level on the inherited stderr (one line per record, as the parent's)."""
    from advisor.logfmt import JSONFormatter, TextFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if json_format else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
