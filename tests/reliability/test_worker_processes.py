"""``capacity-advisor run --workers 2`` as a real daemon against stand-in vLLM targets on loopback (issue 15,
"Both cores"): both worker processes serve their share of the targets (split by the URL's stable hash); a worker
killed with SIGKILL fails the targets it had in flight with a message naming it, so their deployments show
``unavailable``, and is restarted (``/metrics`` counts it) and its targets come back; a reload that adds and removes
targets reaches the workers (new targets scraped, removed targets' keep-alive connections closed); SIGTERM (and
SIGKILL) of the daemon leave no process behind. Waits count cycles and conditions, never wall-clock budgets."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.workers import worker_for
from tests.reliability.iso_support import REPO_ROOT, Daemon, daemon, deployment, vllm_page, wait_for

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for the process tree"),
    pytest.mark.integration,  # worker processes and stand-in targets on loopback
]

WAIT = 90.0
"""Bound on every wait for a condition (a loaded machine); the conditions themselves count cycles."""


class KeepAliveTargets(ThreadingHTTPServer):
    """Serves one vLLM page at every path over HTTP/1.1 keep-alive, counting GETs per path (``hits``), remembering
    the path each open connection last served (``open_paths``), and holding the GETs of ``gated`` paths until
    :meth:`open_gate` (``waiting``: the paths with a GET held now)."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self) -> None:
        self.page = vllm_page()
        self.hits: Counter[str] = Counter()
        self.conns: dict[int, str | None] = {}
        self.waiting: Counter[str] = Counter()
        self.gated: set[str] = set()
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with srv.lock:
                    srv.conns[id(self)] = None

            def finish(self) -> None:
                with suppress(OSError):
                    super().finish()
                with srv.lock:
                    srv.conns.pop(id(self), None)

            def do_GET(self) -> None:
                with srv.lock:
                    srv.hits[self.path] += 1
                    srv.conns[id(self)] = self.path
                    held = self.path in srv.gated and not srv.gate.is_set()
                    if held:
                        srv.waiting[self.path] += 1
                if held:
                    srv.gate.wait(30)
                    with srv.lock:
                        srv.waiting[self.path] -= 1
                with suppress(OSError):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(srv.page)))
                    self.end_headers()
                    self.wfile.write(srv.page)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def close_gate(self, paths: set[str]) -> None:
        with self.lock:
            self.gated = set(paths)
            self.gate.clear()

    def open_gate(self) -> None:
        self.gate.set()

    def held_now(self) -> set[str]:
        with self.lock:
            return {p for p, n in self.waiting.items() if n > 0}

    def open_paths(self) -> set[str]:
        with self.lock:
            return {p for p in self.conns.values() if p is not None}

    def stop(self) -> None:
        self.gate.set()
        self.shutdown()
        self.server_close()


@pytest.fixture()
def targets() -> Iterator[KeepAliveTargets]:
    srv = KeepAliveTargets()
    yield srv
    srv.stop()


def _paths(srv: KeepAliveTargets, per_worker: int) -> dict[int, list[str]]:
    """``per_worker`` target paths for each of two workers (chosen by the daemon's own split)."""
    out: dict[int, list[str]] = {0: [], 1: []}
    i = 0
    while min(len(v) for v in out.values()) < per_worker:
        path = f"/t{i}/metrics"
        w = worker_for(srv.url(path), 2)
        if len(out[w]) < per_worker:
            out[w].append(path)
        i += 1
    return out


def _config(srv: KeepAliveTargets, paths: list[str]) -> dict[str, Any]:
    """One single-target deployment per path (named by the path), a 3 s cycle with the scrape deadline in it."""
    return {
        "scrape_interval": "3s",
        "scrape": {"connect_timeout": "0.5s", "read_timeout": "2.5s"},
        "deployments": [deployment(_name(p), [srv.url(p)]) for p in paths],
    }


def _name(path: str) -> str:
    return path.split("/")[1]


def _states(d: Daemon) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for dep in d.deployments()["deployments"]:
        (t,) = dep["targets"]
        out[dep["name"]] = {"state": dep["state"], "up": t["up"], "reason": t["error_reason"], "error": t["error"]}
    return out


def _cycles(d: Daemon) -> float:
    return d.metric("advisor_cycles_total") or 0.0


def _worker_pids(d: Daemon) -> dict[int, int]:
    """Each worker's current pid, from the log (``worker=N pid=P started``, ``worker=N restarted (pid P``)."""
    pids: dict[int, int] = {}
    for m in re.finditer(r"worker=(\d+) (?:pid=(\d+) started|restarted \(pid (\d+))", d.log()):
        pids[int(m.group(1))] = int(m.group(2) or m.group(3))
    return pids


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie, exited and not reaped yet, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_both_workers_serve_and_a_killed_one_fails_only_its_targets_and_comes_back(
    tmp_path: Path, targets: KeepAliveTargets
) -> None:
    split = _paths(targets, 3)
    paths = split[0] + split[1]
    with daemon(tmp_path, _config(targets, paths), "--workers", "2") as d:
        assert "workers=2 (--workers)" in d.log()
        assert wait_for(lambda: all(s["state"] == "fresh" for s in _states(d).values()), WAIT), d.log()[-3000:]
        # both processes did the work of their own targets
        assert wait_for(
            lambda: all((d.metric("advisor_worker_cpu_seconds_total", worker=w) or 0) > 0 for w in "01"), WAIT
        )
        assert d.metric("advisor_workers") == 2.0
        pids = _worker_pids(d)
        assert set(pids) == {0, 1} and pids[0] != pids[1] and pids[0] != d.proc.pid

        victim, survivor = 1, 0
        targets.close_gate(set(split[victim]))
        assert wait_for(lambda: bool(targets.held_now()), WAIT), "no scrape of the victim's targets was held"
        held = targets.held_now()
        os.kill(pids[victim], signal.SIGKILL)
        message = f"scrape worker {victim} (pid {pids[victim]}) was killed by SIGKILL; it is being restarted"

        def victims_unavailable() -> bool:
            s = _states(d)
            return all(s[_name(p)]["state"] == "unavailable" and s[_name(p)]["error"] == message for p in held)

        assert wait_for(victims_unavailable, WAIT), (_states(d), d.log()[-3000:])
        for p in held:
            assert d.metric("advisor_scrape_errors_total", deployment=_name(p), reason="connection_refused") >= 1
        assert wait_for(lambda: d.metric("advisor_worker_restarts_total", worker=str(victim)) == 1.0, WAIT)
        assert f"worker={victim} restarted" in d.log()
        assert _worker_pids(d)[victim] != pids[victim]
        assert _worker_pids(d)[survivor] == pids[survivor]

        targets.open_gate()
        start = _cycles(d)
        assert wait_for(lambda: all(s["state"] == "fresh" for s in _states(d).values()), WAIT), _states(d)
        assert wait_for(lambda: _cycles(d) >= start + 2, WAIT)
        assert d.metric("advisor_worker_up", worker=str(victim)) == 1.0
        assert requests.get(d.url + "/healthz", timeout=10).status_code == 200
        # the survivor's targets never saw the death
        for p in split[survivor]:
            assert d.metric("advisor_scrape_errors_total", deployment=_name(p), reason="connection_refused") == 0
        assert message not in json.dumps([_states(d)[_name(p)] for p in split[survivor]])


def test_a_reload_reaches_the_workers(tmp_path: Path, targets: KeepAliveTargets) -> None:
    split = _paths(targets, 3)
    first = split[0][:2] + split[1][:2]
    removed = {split[0][0], split[1][0]}
    added = [split[0][2], split[1][2]]
    second = [p for p in first if p not in removed] + added
    cfg_path = tmp_path / "advisor.yaml"
    with daemon(tmp_path, _config(targets, first), "--workers", "2") as d:
        assert wait_for(lambda: set(_states(d)) == {_name(p) for p in first}, WAIT)
        assert wait_for(lambda: all(s["state"] == "fresh" for s in _states(d).values()), WAIT), d.log()[-3000:]
        assert wait_for(lambda: removed <= targets.open_paths(), WAIT), targets.open_paths()  # kept alive

        cfg_path.write_text(json.dumps(_config(targets, second)))
        d.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: set(_states(d)) == {_name(p) for p in second}, WAIT), d.log()[-3000:]
        assert wait_for(lambda: all(s["state"] == "fresh" for s in _states(d).values()), WAIT), _states(d)
        assert all(targets.hits[p] > 0 for p in added)
        # the workers closed the removed targets' connections and scrape them no more
        assert wait_for(lambda: not (removed & targets.open_paths()), WAIT), targets.open_paths()
        before = {p: targets.hits[p] for p in removed}
        start = _cycles(d)
        assert wait_for(lambda: _cycles(d) >= start + 2, WAIT)
        assert {p: targets.hits[p] for p in removed} == before
        assert _worker_pids(d).keys() == {0, 1} and "restarted" not in d.log()


@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGKILL, False)],
    ids=["SIGTERM", "SIGTERM to the process group", "SIGKILL"],
)
def test_stopping_the_daemon_leaves_no_process(
    tmp_path: Path, targets: KeepAliveTargets, sig: int, group: bool
) -> None:
    """SIGTERM: the daemon stops its workers and exits 0 — also when every process of the group gets it at once
    (systemd's ``KillMode=control-group``, a terminal): no worker is "restarted" on the way out. SIGKILL (no handler
    runs): the workers notice the parent's pipe close and exit on their own."""
    paths = _paths(targets, 2)[0] + _paths(targets, 2)[1]
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(json.dumps(_config(targets, paths)))
    log_path = tmp_path / "advisor.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "advisor.cli",
                "run",
                "--config",
                str(cfg),
                "--listen",
                "127.0.0.1:0",
                "--workers",
                "2",
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            start_new_session=True,
        )
    try:
        # two workers asked for (without --workers a config this small scrapes on threads: tests/test_workers.py)
        assert wait_for(lambda: "workers=" in log_path.read_text(), WAIT)
        chosen = re.search(r"workers=(\d+) \((.*?)\)", log_path.read_text())
        assert chosen is not None and chosen.group(2) == "--workers", log_path.read_text()
        n = int(chosen.group(1))
        assert wait_for(lambda: len(re.findall(r"worker=\d+ pid=\d+ started", log_path.read_text())) == n, WAIT)
        assert wait_for(lambda: sum(targets.hits.values()) >= len(paths), WAIT)
        below = _descendants(proc.pid)
        assert len(below) >= n
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        code = proc.wait(timeout=WAIT)
        log = log_path.read_text()
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL), log[-3000:]
        assert wait_for(lambda: not any(_alive(p) for p in below), 30), [p for p in below if _alive(p)]
        assert "restarted" not in log and "being restarted" not in log, log[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_a_worker_leaves_sigterm_and_sigint_to_the_daemon(tmp_path: Path, targets: KeepAliveTargets) -> None:
    """A stop signal that reaches the workers too (systemd signals the whole cgroup, a terminal's Ctrl-C the whole
    process group) does not kill them, so a stopping daemon never restarts one: the daemon stops them itself."""
    paths = _paths(targets, 1)[0] + _paths(targets, 1)[1]
    with daemon(tmp_path, _config(targets, paths), "--workers", "2") as d:
        assert wait_for(lambda: set(_worker_pids(d)) == {0, 1}, WAIT)
        # running (it has reported work), not still importing: a signal before it ignores them still kills it
        assert wait_for(lambda: (d.metric("advisor_worker_cpu_seconds_total", worker="0") or 0) > 0, WAIT)
        pid = _worker_pids(d)[0]
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGINT)
        start = _cycles(d)
        assert wait_for(lambda: _cycles(d) >= start + 2, WAIT)
        assert _alive(pid) and "restarted" not in d.log(), d.log()[-2000:]
        assert d.metric("advisor_worker_restarts_total", worker="0") == 0.0


def test_healthz_fails_while_a_worker_is_down(tmp_path: Path, targets: KeepAliveTargets) -> None:
    """A worker that keeps dying is restarted within the budget, then left down: ``/healthz`` says which and why."""
    paths = _paths(targets, 1)[0] + _paths(targets, 1)[1]
    with daemon(tmp_path, _config(targets, paths), "--workers", "2") as d:
        assert wait_for(lambda: set(_worker_pids(d)) == {0, 1}, WAIT)
        # the restart budget (advisor.workers.RESTART_BURST in RESTART_WINDOW_SECONDS) exhausted: kill it each time
        from advisor.workers import RESTART_BURST

        for n in range(RESTART_BURST + 1):
            assert wait_for(lambda n=n: d.log().count("worker=1 restarted") >= n, WAIT), d.log()[-2000:]
            pid = _worker_pids(d)[1]
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            assert wait_for(lambda pid=pid: not _alive(pid), WAIT)
        assert wait_for(lambda: "restart budget used up (5 restarts within 60s)" in d.log(), WAIT), d.log()[-2000:]
        assert "was killed by SIGKILL; its restart budget is used up" in d.log(), d.log()[-2000:]
        r = requests.get(d.url + "/healthz", timeout=10)
        assert r.status_code == 503 and "worker 1 is down" in r.text, r.text
        assert d.metric("advisor_worker_up", worker="1") == 0.0
        assert d.metric("advisor_worker_up", worker="0") == 1.0
