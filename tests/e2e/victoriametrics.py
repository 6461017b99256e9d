"""A real VictoriaMetrics on loopback for tests (Debian's ``victoria-metrics`` package, binary
``/usr/bin/victoria-metrics``; 1.79.5 on Debian 12).

``start_victoriametrics`` writes a ``-promscrape.config`` (Prometheus ``scrape_configs`` syntax), starts the
single-node server on a free loopback port with its own ``-storageDataPath`` and
``-search.latencyOffset=0s``, waits for ``/health`` and yields its base URL; it stops the process (SIGTERM,
then SIGKILL) on exit. ``require_binary`` skips a test when a server binary is absent — and fails it when the
``CI`` environment variable is set, so CI never passes by skipping.

Why ``-search.latencyOffset=0s``: by default VictoriaMetrics hides samples newer than 30 s from queries
(``-search.latencyOffset``, default ``30s``, ``victoria-metrics -help``), so the newest points of a
``query_range`` ending now are missing or held back — an advisor evaluating a short window would see nothing
recent. Operators pointing ``source: prometheus`` at VictoriaMetrics need the same flag (or a small value).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.prometheus import free_port

BINARY = "victoria-metrics"


def require_binary(name: str, hint: str) -> str:
    """The path of executable ``name``; when absent, skip the test with ``hint`` — or fail when ``CI`` is set.

    Raises:
        pytest.skip.Exception / pytest.fail.Exception: the binary is not on PATH.
    """
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"the {name} binary is not on PATH ({hint}; CI runs scripts/install-system-deps)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason} — CI is set, so this is a failure, not a skip")
    pytest.skip(reason)


def victoriametrics_binary() -> str:
    """The ``victoria-metrics`` executable (skip, or fail under ``CI``, when absent)."""
    return require_binary(BINARY, "Debian: apt-get install -y victoria-metrics")


def _tail(log: Path, chars: int = 2000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


@contextmanager
def start_victoriametrics(
    workdir: Path,
    scrape_config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Run VictoriaMetrics (scraping ``scrape_config`` when given: ``{"global": …, "scrape_configs": […]}``);
    yield its base URL ``http://127.0.0.1:PORT``. ``extra_args``: further flags (``-search.maxUniqueTimeseries=…``).

    Raises:
        RuntimeError: it exited or did not answer ``/health`` within ``timeout`` seconds (with its log's end).
    """
    binary = victoriametrics_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    args = [
        binary,
        f"-storageDataPath={workdir / 'data'}",
        "-search.latencyOffset=0s",
        "-loggerLevel=WARN",
        *extra_args,
    ]
    if scrape_config is not None:
        (workdir / "scrape.json").write_text(json.dumps(scrape_config, indent=1))  # YAML is a superset of JSON
        args.append(f"-promscrape.config={workdir / 'scrape.json'}")
    log_path = workdir / "victoria-metrics.log"
    proc: subprocess.Popen[bytes] | None = None
    url = ""
    healthy = False
    try:
        for _attempt in range(3):  # a free port can be taken between probing and binding
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    [*args, f"-httpListenAddr=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT, cwd=workdir
                )
            deadline = time.monotonic() + timeout
            while not healthy and proc.poll() is None and time.monotonic() < deadline:
                try:
                    healthy = requests.get(f"{url}/health", timeout=1).ok
                    if healthy:
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.1)
            if proc.poll() is None:
                break
            if "address already in use" not in _tail(log_path):
                raise RuntimeError(f"victoria-metrics exited with {proc.returncode}: {_tail(log_path)}")
        assert proc is not None
        if not healthy:
            raise RuntimeError(f"victoria-metrics not healthy within {timeout:g}s: {_tail(log_path)}")
        yield url
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def active_targets(url: str) -> list[dict[str, Any]]:
    """``/api/v1/targets`` ``activeTargets`` (the same shape as Prometheus's)."""
    r = requests.get(f"{url}/api/v1/targets", timeout=2)
    r.raise_for_status()
    targets: list[dict[str, Any]] = r.json()["data"]["activeTargets"]
    return targets


def newest_sample_seconds(url: str, selector: str, lookback_seconds: float = 60.0) -> dict[str, float]:
    """Each ``instance``'s newest raw sample time (Unix seconds) of ``selector`` that queries can see now.

    MetricsQL's ``tlast_over_time`` (the raw sample's timestamp; Prometheus's ``timestamp()`` on an instant query
    can return the evaluation time in VictoriaMetrics). A scrape is searchable only after VictoriaMetrics flushes
    its pending rows (about a second, longer on a loaded machine), so a test polls this instead of sleeping.
    """
    q = f"tlast_over_time({selector}[{lookback_seconds:g}s])"
    r = requests.get(f"{url}/api/v1/query", params={"query": q, "nocache": "1"}, timeout=5)
    r.raise_for_status()
    return {s["metric"].get("instance", ""): float(s["value"][1]) for s in r.json()["data"]["result"]}
