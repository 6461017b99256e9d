"""Acceptance: the demo opens a recommendation while the ramp deployment's pool is saturated and resolves
it after recovery, within 60 seconds, as seen on the advisor's own /metrics (the KV-pool dials)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration


def _active(url: str) -> list[float]:
    text = requests.get(url + "/metrics", timeout=5).text
    return [
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "advisor_recommendation_active"
        and s.labels.get("deployment") == "demo-chat-8b"
        and s.labels.get("dial") in ("kv_cache_dtype", "gpu_memory_utilization", "tensor_parallel_size")
    ]


def test_demo_opens_then_resolves_within_60_seconds() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor.cli", "demo", "--listen", "127.0.0.1:0", "--duration", "70"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    start = time.monotonic()
    try:
        url = None
        while url is None and time.monotonic() - start < 20:
            for line in lines:
                m = re.search(r"advisor metrics: (http://\S+)/metrics", line)
                if m:
                    url = m.group(1)
            time.sleep(0.1)
        assert url, "".join(lines)
        seen_open = seen_resolved = False
        while time.monotonic() - start < 60 and not seen_resolved:
            values = _active(url)
            if 1.0 in values:
                seen_open = True
            elif seen_open and values and all(v == 0.0 for v in values):
                seen_resolved = True
            time.sleep(0.5)
        out = "".join(lines)
        assert seen_open, out
        assert seen_resolved, out
        assert "OPENED" in out and "RESOLVED" in out
        # one line per incident: the saturation problem, its suggested turn and how many alternatives ride with it
        opened = next(line for line in lines if "OPENED" in line and "demo-chat-8b saturation:" in line)
        assert re.search(r"\(\+\d+ alternatives?, \d+ withheld\)", opened), opened
        if "saturation: [kv_saturation] " in opened:
            assert "flag: --" in opened and "why: KV usage" in opened
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0
    # a clean stop says so (a silent end reads like a crash)
    assert any(line.startswith("capacity-advisor demo: stopped;") for line in lines), "".join(lines[-5:])
