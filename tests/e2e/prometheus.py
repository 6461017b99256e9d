"""A real Prometheus on loopback for end-to-end tests (Debian's ``prometheus`` package).

``start_prometheus`` writes a config scraping the given ``host:port`` targets per job, starts the binary on a
free loopback port with its own TSDB directory, waits until it answers and yields its base URL; it stops the
process (SIGTERM, then SIGKILL) on exit. ``wait_for_series`` polls an instant query until it returns data.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
import yaml


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def prometheus_binary() -> str | None:
    """The ``prometheus`` executable on PATH, or ``None``."""
    return shutil.which("prometheus")


def hostport(url: str) -> str:
    """``http://127.0.0.1:8000/metrics`` → ``127.0.0.1:8000`` (a static_configs target)."""
    return url.split("://", 1)[-1].split("/", 1)[0]


@contextmanager
def start_prometheus(
    workdir: Path,
    jobs: Mapping[str, Sequence[str]],
    scrape_interval: str = "500ms",
    extra_config: Mapping[str, Any] | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 40.0,
) -> Iterator[str]:
    """Run Prometheus scraping ``jobs`` (job name → ``host:port`` targets, path ``/metrics``); yield its URL.

    Raises:
        RuntimeError: the binary is absent, or it did not answer ``/-/ready`` within ``timeout`` seconds
            (the message carries the end of its log).
    """
    binary = prometheus_binary()
    if binary is None:
        raise RuntimeError("the prometheus binary is absent: run scripts/install-system-deps")
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [
            {"job_name": job, "scrape_interval": scrape_interval, "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ],
    }
    config.update(extra_config or {})
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log_path = workdir / "prometheus.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                *extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
                try:
                    if requests.get(f"{url}/-/ready", timeout=2).ok:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"prometheus not ready within {timeout:g}s: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def wait_for_series(url: str, query: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Poll ``query`` until it returns a non-empty vector; return it.

    Raises:
        TimeoutError: still empty after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=5)
            if r.ok:
                result: list[dict[str, Any]] = r.json()["data"]["result"]
                if result:
                    return result
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no data for {query!r} within {timeout:g}s")
        time.sleep(0.3)
