"""Helpers for the crash-window and lifecycle trials (issue 14): a recording webhook receiver on loopback that
can fail or hang, a stand-in vLLM whose page flips between saturated and healthy, and the real daemon
(``capacity-advisor run`` in a subprocess) on a state file and an outbox folder that outlive it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import REPO_ROOT

SATURATED = Phase("saturated", 1e9, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04)
HEALTHY = Phase("healthy", 1e9, 0.3, 20, 0, 2.0, 1000, 200, 0, 0.1, 0.02)
IDEMPOTENCY_HEADER = "X-Advisor-Idempotency-Key"


@dataclass(frozen=True)
class Delivered:
    """One alert of one acknowledged POST."""

    fingerprint: str
    status: str  # firing | resolved
    key: str  # the alert's idempotency_key annotation
    reason: str | None  # the resolved_reason annotation, when present


@dataclass
class RecordingReceiver:
    """A webhook receiver on loopback. ``mode``: ``ok`` (200), ``fail`` (503) or ``hang`` (holds the request
    until :meth:`release` or 60 s, then 503)."""

    mode: str = "ok"
    alerts: list[Delivered] = field(default_factory=list)
    posts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def start(self) -> RecordingReceiver:
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with rec.lock:
                    rec.posts += 1
                    mode = rec.mode
                if mode == "hang":
                    rec.released.wait(60)
                    mode = "fail"
                if mode == "ok":
                    body = json.loads(raw)
                    with rec.lock:
                        for a in body["alerts"]:
                            ann = a["annotations"]
                            rec.alerts.append(
                                Delivered(
                                    a["fingerprint"], a["status"], ann["idempotency_key"], ann.get("resolved_reason")
                                )
                            )
                code = 200 if mode == "ok" else 503
                try:
                    self.send_response(code)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:  # the advisor gave up on the request (a stop, an abandoned request)
                    pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self._server = srv
        self.url = f"http://127.0.0.1:{srv.server_address[1]}/hook"
        return self

    def stop(self) -> None:
        self.released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def snapshot(self) -> list[Delivered]:
        with self.lock:
            return list(self.alerts)

    def wait_for(self, pred: Callable[[list[Delivered]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.snapshot()):
                return True
            time.sleep(0.05)
        return False


class FlipTarget:
    """A stand-in vLLM whose page is saturated or healthy as the test says (counters keep moving)."""

    def __init__(self) -> None:
        self.engine = StandInEngine(phases=(HEALTHY,), speed=1.0, num_gpu_blocks=1000)
        self.server = StandInServer(self.engine)
        self.server.start_background()

    def set(self, saturated: bool) -> None:
        self.engine.phases = (SATURATED if saturated else HEALTHY,)

    def url(self) -> str:
        return self.server.url()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def deployment(name: str, target: str) -> dict[str, Any]:
    return {
        "name": name,
        "engine": "vllm",
        "targets": [target],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
    }


def write_config(
    path: Path,
    deployments: list[dict[str, Any]],
    receiver_url: str,
    outbox: Path | None,
    **receiver: Any,
) -> Path:
    """A tiny config: 0.2 s interval, 1 s window, ``kv_saturation`` only, 1 ms for-duration and cooldown."""
    cfg: dict[str, Any] = {
        "scrape_interval": "0.2s",
        "evaluation_window": "1s",
        "state_file": str(path.parent / "state.json"),
        "deployments": deployments,
        "receivers": [{"name": "ops", "url": receiver_url, "backoff_seconds": "0.1s", **receiver}],
        "rules": {"cooldown": "1ms", "kv_saturation": {"for": "1ms"}, "resolve_for": "0.4s"},
    }
    if outbox is not None:
        cfg["outbox_dir"] = str(outbox)
    path.write_text(yaml.safe_dump(cfg))
    return path


class Daemon:
    """``capacity-advisor run`` in a subprocess; stderr is collected on a thread."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        argv = [sys.executable, "-m", "advisor.cli", "run", "--config", str(config), "--listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.url: str | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"serving (http://\S+)/metrics", line)
            if m:
                self.url = m.group(1)
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 60.0) -> str:
        assert self._ready.wait(timeout), "the daemon did not start"
        assert self.url is not None, "the daemon exited:\n" + self.log()
        return self.url

    def log(self) -> str:
        return "".join(self.lines)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout)
        self._close()
        return rc

    def _close(self) -> None:
        self._reader.join(5)
        if self.proc.stderr is not None and not self._reader.is_alive():
            self.proc.stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close()


@contextmanager
def daemon(config: Path, env: dict[str, str] | None = None) -> Iterator[Daemon]:
    d = Daemon(config, env)
    try:
        yield d
    finally:
        if d.proc.poll() is None:
            d.signal(signal.SIGTERM)
            try:
                d.wait(20)
            except subprocess.TimeoutExpired:
                d.kill()


def outbox_keys(outbox: Path) -> set[str]:
    """Every alert key an outbox folder holds: waiting or remembered as delivered."""
    keys: set[str] = set()
    for f in outbox.glob("*.outbox.json"):
        data = json.loads(f.read_text())
        keys.update(m["key"] for e in data.get("pending", []) for m in e.get("alerts", []))
        keys.update(data.get("delivered", []))
    return keys


def outbox_pending(outbox: Path) -> list[str]:
    """The alert keys waiting in an outbox folder."""
    out: list[str] = []
    for f in outbox.glob("*.outbox.json"):
        data = json.loads(f.read_text())
        out += [m["key"] for e in data.get("pending", []) for m in e.get("alerts", [])]
    return out


def state(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}
