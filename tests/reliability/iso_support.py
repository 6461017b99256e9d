"""Loopback stand-ins for the isolation trials (issue 14): targets that drip their answer a byte at a time, a
static vLLM page served at many paths with a per-path hit count, and the daemon (``capacity-advisor run``) as a
subprocess whose log goes to a file (a pipe nobody reads would block it)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from tests.states import VLLMEngine

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIP_SECONDS = 0.2
"""One byte every 0.2 s, as the issue's trial did."""


class DripServer:
    """A raw-socket server that answers every connection a byte at a time, forever.

    ``mode="header"``: the status line, then an endless header section (``X-Drip: …``), one byte per
    :data:`DRIP_SECONDS` — the response never gets past its headers. ``mode="body"``: the status line and headers
    at once (``Content-Length`` 1 MiB), then the body one byte per :data:`DRIP_SECONDS`. ``connections`` counts the
    connections accepted."""

    def __init__(self, mode: str) -> None:
        assert mode in ("header", "body"), mode
        self.mode = mode
        self.connections = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        def drip(data: bytes) -> None:
            for b in data:
                if self._stop.is_set():
                    raise OSError("stopped")
                conn.sendall(bytes([b]))
                time.sleep(DRIP_SECONDS)

        try:
            conn.settimeout(5)
            conn.recv(65536)
            if self.mode == "header":
                drip(b"HTTP/1.1 200 OK\r\n")
                while True:
                    drip(b"X-Drip: " + b"a" * 40 + b"\r\n")
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: 1048576\r\n\r\n"
            )
            while True:
                drip(b"# drip\n")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()


def vllm_page(model: str = "meta-llama/Llama-3.1-8B-Instruct") -> bytes:
    """An idle vLLM 0.11 page (nothing running: nothing frozen, nothing proposed)."""
    engine = VLLMEngine(model_name=model, num_gpu_blocks=2000, max_model_len=8192, gpu_memory_utilization=0.9)
    return engine.render().encode()


class PageServer(ThreadingHTTPServer):
    """Serves ``page`` at every path and counts the GETs per path (``hits``)."""

    daemon_threads = True
    request_queue_size = 256  # 50 targets connect at once: the default backlog of 5 drops SYNs (1 s retries)

    def __init__(self, page: bytes) -> None:
        self.page = page
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with server._lock:
                    server.hits[self.path] += 1
                with suppress(OSError):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(server.page)))
                    self.end_headers()
                    self.wfile.write(server.page)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def deployment(name: str, targets: list[str]) -> dict[str, Any]:
    """One vLLM deployment of the config."""
    return {
        "name": name,
        "engine": "vllm",
        "targets": targets,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }


class Daemon:
    """``capacity-advisor run`` as a subprocess on loopback; ``url`` once it serves, ``log`` its stderr so far."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, url: str) -> None:
        self.proc = proc
        self.log_path = log_path
        self.url = url

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metric(self, name: str, **labels: str) -> float | None:
        """The first sample of ``name`` on ``/metrics`` whose labels include ``labels`` (``None``: absent)."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        for line in text.splitlines():
            named = line.startswith(name + "{") or line.startswith(name + " ")
            if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None

    def deployments(self) -> dict[str, Any]:
        body: dict[str, Any] = requests.get(self.url + "/api/v1/deployments", timeout=10).json()
        return body


@contextmanager
def daemon(tmp_path: Path, config: dict[str, Any], *flags: str, env: dict[str, str] | None = None) -> Iterator[Daemon]:
    """Write ``config`` (JSON is YAML), start the daemon on it and yield it once it serves; killed afterwards.
    ``env``: variables added to this process's environment for the daemon."""
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(json.dumps(config))
    log_path = tmp_path / "advisor.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "advisor.cli", "run", "--config", str(cfg), "--listen", "127.0.0.1:0", *flags],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            env=None if env is None else {**os.environ, **env},
        )
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None:
            assert proc.poll() is None, f"the daemon exited: {log_path.read_text(errors='replace')[-2000:]}"
            assert time.monotonic() < deadline, "the daemon did not start serving within 60 s"
            m = re.search(r"serving (http://\S+)/metrics", log_path.read_text(errors="replace"))
            url = m.group(1) if m else None
            time.sleep(0.05)
        yield Daemon(proc, log_path, url)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def wait_for(pred: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
    """Poll ``pred`` until it holds or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return pred()
