"""Shared fixtures: real loopback HTTP servers (port 0, in threads), never mocks."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"

# Hypothesis's own timing bounds (a 200 ms deadline per example, the too_slow health check on generation) are
# wall-clock bounds: on a shared, loaded CI machine they fail tests whose properties hold. Off for every property;
# max_examples and the properties themselves stay each test's own.
settings.register_profile("advisor", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("advisor")

MAX_TEST_WORKERS = 4
"""pytest-xdist workers at most (``-n auto`` in pyproject's addopts): each file runs whole on one worker
(``--dist loadfile``: its module fixtures, its real servers), and every worker may start real servers at once."""
LATE_WORKERS = 1
"""Workers beyond one per usable CPU (``-n auto``), which take only the real-server trials (:data:`TRIAL_FILES`,
:data:`WAITING_FILES`) and only once nothing but trials is left to hand out and :data:`FIRST_FILES` have ended
(:func:`pytest_xdist_make_scheduler`): the trials mostly wait — on cycles, windows, a simulated clock — so a third
trial beside two leaves their durations as they were (measured on 2 cores: the 21 trial files other than the CPU
vLLM's, 825 s of test time, took 293 s on three workers with the cores 43 % idle, each file within ±4 s of its
two-worker duration), while the plain tests use the cores whole and gain nothing from a third worker (267 s on
three, ~270 s on two)."""

FIRST_FILES = ("tests/e2e/test_vllm_real.py",)
"""Handed out first: the real CPU vLLM (~150 s, the longest file), which saturates the cores in its load phases;
while it runs, the other workers take the plain unit tests."""
TRIAL_FILES = (
    "tests/e2e/",
    "tests/reliability/",
    "tests/test_demo.py",
    "tests/test_bench_fleet.py",
    "tests/sources/test_victoriametrics_real.py",
    "tests/sources/test_prometheus_real.py",
)
"""Real-server trials that count cycles or seconds (30–80 s each): handed out last, after the plain tests, so that
none runs beside the CPU vLLM's load (CI ci23: the daemon beside it and another trial left a poll unanswered), and
the workers share them at the end."""
WAITING_FILES = (
    "tests/test_console_logs.py",
    "tests/test_cli.py",
    "tests/test_model_mismatch.py",
    "tests/test_operations.py",
    "tests/test_prometheus_mode.py",
    "tests/test_prometheus_read.py",
    "tests/test_daemon_integration.py",
    "tests/test_notify_daemon.py",
    "tests/notify/test_alertmanager_real.py",
)
"""Files outside :data:`TRIAL_FILES` that mostly wait (daemons and ``once`` runs on loopback, a subprocess's interval,
a real Alertmanager or Prometheus): handed out with the trials, after the plain tests, so that the extra worker
(:data:`LATE_WORKERS`) shares them. Measured alone on 2 cores, 2026-12-07 (wall and CPU, children included): 211 s
of wall for 77 s of CPU together (``test_console_logs`` 51 s / 18 s, ``test_cli`` 39 / 16, ``test_model_mismatch``
25 / 7)."""
LONGEST_TRIALS = (
    "tests/e2e/test_calibration_llamacpp.py",
    "tests/reliability/test_isolation.py",
    "tests/e2e/test_replicas_advice.py",
    "tests/test_demo.py",
    "tests/e2e/test_desired_replicas_ramp.py",
    "tests/reliability/test_crash_lifecycle.py",
    "tests/reliability/test_crash_window.py",
    "tests/reliability/test_alert_expiry.py",
    "tests/e2e/test_sources_agree.py",
    "tests/sources/test_victoriametrics_real.py",
)
"""The trial files of 35 s or more (108 s down to 36 s, measured 2026-12-07 on 2 cores), handed out first among the
trials in this order, longest first: the workers take files as they free up, so a long file handed out last sets
the suite's end alone (simulated on that run's durations: the two workers end 41 s apart in collection order, 1 s
apart longest first). A file left out or renamed here only loses that ordering."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: the CPUs this process may use (affinity and the cgroup's quota,
    :func:`advisor.workers.usable_cpus`) and :data:`LATE_WORKERS`, at most :data:`MAX_TEST_WORKERS`."""
    from advisor.workers import usable_cpus

    return max(1, min(MAX_TEST_WORKERS, usable_cpus().cpus + LATE_WORKERS))


def _trial(scope: str) -> bool:
    return scope.startswith(TRIAL_FILES + WAITING_FILES)


def _first(scope: str) -> bool:
    return scope.startswith(FIRST_FILES)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject's addopts) with two changes; other ``--dist`` modes are xdist's own.

    * The field-state round modules (:data:`tests.states.field.ROUND_MODULE`) are one work unit, run by one worker,
      so that their states share one pool (:func:`tests.states.field.shared_runs`: ~1 s of waiting each, 274
      states) instead of each module waiting for its own.
    * Workers past one per usable CPU (``gw<N>`` with N ≥ the CPUs: :data:`LATE_WORKERS`) wait until every file
      left to hand out is a trial (:data:`TRIAL_FILES`, :data:`WAITING_FILES`) and :data:`FIRST_FILES` have ended,
      then take trials as the others do: no trial runs beside the CPU vLLM's load, and the plain tests keep the
      cores.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    from advisor.workers import usable_cpus
    from tests.states.field import ROUND_MODULE

    early = usable_cpus().cpus

    class _Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/states/test_field_round*.py" if ROUND_MODULE.search(path) else path

        def _late(self, node: Any) -> bool:
            return int(str(node.gateway.id).removeprefix("gw")) >= early

        def _trials_left_only(self) -> bool:
            if not all(_trial(scope) and not _first(scope) for scope in self.workqueue):
                return False
            units = [unit for work in self.assigned_work.values() for scope, unit in work.items() if _first(scope)]
            return all(all(unit.values()) for unit in units)

        def _assign_work_unit(self, node: Any) -> None:
            if self._late(node) and not self._trials_left_only():
                return  # until then idle: mark_test_complete looks again
            super()._assign_work_unit(node)

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            for other in self.nodes:
                if other is not node and self._late(other):
                    # twice, as xdist's own first distribution does (its #277): a worker runs an item only once it
                    # holds the next one (or is told to stop), so a one-test file alone would wait for the next
                    # completion anywhere (CI: the llama.cpp trial's one test held back to the suite's end)
                    self._reschedule(other)
                    self._reschedule(other)

    return _Scheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """:data:`FIRST_FILES`, then the plain tests, then :data:`TRIAL_FILES` and :data:`WAITING_FILES`,
    :data:`LONGEST_TRIALS` first (a stable sort: each file's own order kept; ``--dist loadfile`` hands files to the
    workers in this order)."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        resolved = Path(str(item.path)).resolve()
        if not resolved.is_relative_to(REPO_ROOT):  # a test file named from outside the checkout: a plain one
            return (1, 0)
        path = resolved.relative_to(REPO_ROOT).as_posix()
        if path.startswith(FIRST_FILES):
            return (0, 0)
        if not _trial(path):
            return (1, 0)
        return (2, LONGEST_TRIALS.index(path) if path in LONGEST_TRIALS else len(LONGEST_TRIALS))

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs the CLI in process (``advisor.cli._setup_logging``) points the root logger at the
    ``sys.stderr`` pytest captured for it; restore the root's handlers and level afterwards, so later tests do not
    log into that closed stream ("--- Logging error --- ValueError: I/O operation on closed file")."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    handle: Callable[[BaseHTTPRequestHandler], None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.server.handle(self)

    def do_POST(self) -> None:
        self.server.handle(self)


def reply(h: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str = "text/plain") -> None:
    """Send a whole response."""
    h.send_response(code)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


@pytest.fixture
def http_server() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], str]]:
    """Start loopback servers with a handler function; returns their base URL. Stopped after the test."""
    servers: list[_Server] = []

    def start(handle: Callable[[BaseHTTPRequestHandler], None]) -> str:
        srv = _Server(("127.0.0.1", 0), _Handler)
        srv.handle = handle
        # a short poll: shutdown() waits for the loop to look again (0.5 s by default, at every teardown)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


@dataclass
class Receiver:
    """A webhook receiver: records JSON bodies; ``script`` gives the status code for each POST in turn."""

    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    script: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if pred(list(self.bodies)):
                    return True
            time.sleep(0.1)
        return False


@pytest.fixture
def webhook_receiver(http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str]) -> Receiver:
    """A real webhook receiver on loopback."""
    rec = Receiver()

    def handle(h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length", "0"))
        raw = h.rfile.read(length)
        with rec.lock:
            code = rec.script.pop(0) if rec.script else 200
            rec.codes.append(code)
            if 200 <= code < 300:
                rec.bodies.append(json.loads(raw))
        reply(h, code, b"{}" if code < 300 else b"unavailable", "application/json")

    rec.url = http_server(handle) + "/hook"
    return rec
