"""The advisor daemon as the CPU-vLLM trials run it: its config for the session's vLLM
(:func:`advisor_config`), started on a free loopback port (:func:`run_advisor`) and polled (:class:`Advisor`).

Shared by ``tests/e2e/test_vllm_real.py`` and ``tests/e2e/calibration_vllm.py`` (whose test runs in the former's
file, so that one worker starts one vLLM: ``--dist loadfile`` hands each file to one worker).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.e2e.vllm_cpu import VLLMServer, free_port, parse_exposition

SCRAPE_SECONDS = 2.0
FOR_SECONDS = 4.0
"""Every rule's for-duration in the test's config (the longest is what the healthy phase is measured by)."""
POLL_DROPS_ALLOWED = 3
"""Polls of the daemon per test it may drop (connection closed or timed out) and that are asked again."""

RULES = (
    "pool_context",
    "admission_thrash",
    "queue_growth",
    "kv_saturation",
    "goodput",
    "speculative_decoding",
    "kv_budget",
    "weights_crowd",
    "over_provisioned",
    "model_drift",
)


@dataclass
class Advisor:
    """The daemon under test: ``url`` its base; ``log`` its output."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]
    evaluations_seen: set[float] = field(default_factory=set)
    dropped: list[str] = field(default_factory=list)
    """Polls the daemon dropped unanswered (connection closed or timed out) and that were asked again."""

    def get(self, path: str) -> Any:
        """``path``'s JSON; a poll the daemon drops is asked again, at most :data:`POLL_DROPS_ALLOWED` times per test
        (on a 2-core machine beside the saturated CPU vLLM and another test file, the daemon once left a poll
        unanswered for 10 s: CI, 2026-12-03; what this file tests is the advice, and a few lost polls do not change
        it, while a daemon that drops more still fails)."""
        return self._fetch(path).json()

    def _fetch(self, path: str) -> requests.Response:
        """``path``'s answer (2xx), asked again when dropped, as :meth:`get` says."""
        while True:
            try:
                r = requests.get(self.url + path, timeout=10)
                break
            except (requests.ConnectionError, requests.Timeout) as exc:
                self.dropped.append(f"{path}: {exc}")
                assert len(self.dropped) <= POLL_DROPS_ALLOWED, self.dropped
                time.sleep(1.0)
        r.raise_for_status()
        return r

    def deployment(self) -> dict[str, Any]:
        deps = self.get("/api/v1/deployments")["deployments"]
        assert len(deps) == 1, deps
        d: dict[str, Any] = deps[0]
        return d

    def recommendations(self) -> list[dict[str, Any]]:
        """Open and recently resolved recommendations."""
        recs: list[dict[str, Any]] = self.get("/api/v1/recommendations")["recommendations"]
        return recs

    def own_metric(self, name: str) -> float:
        """An unlabelled sample of the advisor's own ``/metrics``."""
        text = self._fetch("/metrics").text  # a dropped poll asked again (CI, 2026-12-03: a 10 s read timeout here)
        for labels, value in parse_exposition(text).get(name, []):
            if not labels:
                return value
        raise AssertionError(f"{name} absent from the advisor's /metrics")

    def cycles(self) -> float:
        return self.own_metric("advisor_cycles_total")

    def last_evaluation(self) -> float:
        """Unix time of the last evaluation (its scrape came just before)."""
        return self.own_metric("advisor_last_evaluation_timestamp_seconds")

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def advisor_config(server: VLLMServer) -> dict[str, Any]:
    """The daemon's config: the deployment as vLLM runs (the model's own config.json, the flags of
    :data:`tests.e2e.vllm_cpu.SHAPE`), every rule's for-duration :data:`FOR_SECONDS`."""
    shape = server.shape
    return {
        "scrape_interval": f"{SCRAPE_SECONDS:g}s",
        "evaluation_window": "20s",
        "deployments": [
            {
                "name": "tiny-cpu",
                "engine": "vllm",
                "targets": [server.metrics_url],
                "model": str(server.model_dir / "config.json"),
                "gpu_memory_gib": 1.0,  # VLLM_CPU_KVCACHE_SPACE; the pool itself is the override
                "dtype": "float32",
                "max_model_len": shape.max_model_len,
                "max_num_seqs": shape.max_num_seqs,
                "max_num_batched_tokens": shape.max_num_batched_tokens,
                "block_size": shape.block_size,
                "num_gpu_blocks_override": shape.num_gpu_blocks_override,
                "slo": {"ttft_seconds": 30, "tpot_seconds": 5, "target_ratio": 0.9},
            }
        ],
        "rules": {
            "cooldown": "1h",
            **{rule: {"for": f"{FOR_SECONDS:g}s"} for rule in RULES},
            "goodput": {"for": f"{FOR_SECONDS:g}s", "min_requests": 5},
        },
    }


def longest_for(config: dict[str, Any]) -> float:
    """The longest ``for`` among the config's rules, in seconds (the config writes them as ``Ns``)."""
    fors = [float(str(v["for"]).removesuffix("s")) for v in config["rules"].values() if isinstance(v, dict)]
    return max(fors)


@contextlib.contextmanager
def run_advisor(config: dict[str, Any], tmp_path: Path) -> Iterator[Advisor]:
    """``capacity-advisor run`` with ``config`` on a free loopback port until ``/readyz`` answers; stopped after."""
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp_path / "advisor.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "advisor.cli", "run", "--config", str(cfg), "--listen", f"127.0.0.1:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    adv = Advisor(f"http://127.0.0.1:{port}", log, proc)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the advisor exited with {proc.returncode}:\n{adv.log_tail()}")
            try:
                if requests.get(adv.url + "/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the advisor was not ready within 60s:\n{adv.log_tail()}")
            time.sleep(0.2)
        yield adv
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
