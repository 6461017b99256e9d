"""Issue 7 acceptance 3 and 5: the advisor against the simulated demo fleet.

3. In each demo scenario the advisor's top-ranked dial, turned in the simulator, raises goodput (or lowers
   cost at the same goodput), in the direction the advisor predicted; the sizes of both are printed.
5. A real Prometheus scrapes the simulated fleet and the advisor: every target up with no scrape error, and the
   advisor's own /metrics passes `promtool check metrics`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from advisor.capacity.hardware import get_gpu
from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.sim.fleet import simulate
from advisor.sim.scenarios import DEMO_SCENARIOS, Scenario
from advisor.sim.server import RunningFleet, start_fleet

pytestmark = pytest.mark.integration

_FIELD = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_cache_dtype": "kv_cache_dtype",
    "tensor_parallel_size": "tensor_parallel_size",
    "max_num_seqs": "max_num_seqs",
    "max_model_len": "max_model_len",
    "replicas": "replicas",
    "weight_quantization": "quantization",
    "instance_type": "gpu",
}


def _config(fleet: RunningFleet) -> Any:
    return parse_config(
        {
            "scrape_interval": "2s",  # a 1.6 s deadline: a loaded 2-core host answers the fleet's pages late
            "evaluation_window": "8s",
            "deployments": [s.deployment_fields(fleet.urls(s.name)) for s in DEMO_SCENARIOS],
            "rules": {"goodput": {"min_requests": 3}},
        }
    )


@pytest.fixture(scope="module")
def fleet() -> Iterator[RunningFleet]:
    f = start_fleet(DEMO_SCENARIOS, speed=20.0)
    time.sleep(3)  # 60 simulated seconds: the saturated pool fills, the traffic settles
    yield f
    f.stop()


def _top(fleet: RunningFleet) -> dict[str, dict[str, Any]]:
    _, collector, metrics = make_registry()
    svc = Service(_config(fleet), collector, metrics, ignore_for=True)
    try:
        for _ in range(4):
            svc.scrape_once()
            time.sleep(2.0)
        svc.scrape_once()
        result = svc.evaluate_once()
    finally:
        svc.close()
    return {d.name: (d.as_dict()["recommendations"] or [None])[0] for d in result.deployments}


def _run(s: Scenario) -> Any:
    return simulate(
        s.engine_config(),
        s.traffic,
        duration=300.0,
        slo_ttft_seconds=s.slo_ttft_seconds,
        slo_tpot_seconds=s.slo_tpot_seconds,
        replicas=s.replicas,
        seed=s.seed,
        warmup=30.0,
    )


def test_turning_the_top_dial_in_the_simulator_moves_goodput_or_cost_as_predicted(
    fleet: RunningFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    tops = _top(fleet)
    for _ in range(2):  # counted in rounds, not seconds: a round whose scrapes all timed out on a loaded host
        if all(tops[n] is not None for n in ("kv-saturated", "over-provisioned")):
            break
        tops = _top(fleet)
    assert tops["healthy"] is None or tops["healthy"]["action"] != "increase"  # nothing to scale up
    checked = 0
    for s in DEMO_SCENARIOS:
        rec = tops[s.name]
        if rec is None:
            continue
        field = _FIELD[rec["dial"]]
        turned = s.replace(**{field: rec["suggested"]})
        before, after = _run(s), _run(turned)
        # cost: GPU memory bought (a smaller GPU costs less than a bigger one of the same vendor)
        gpus_before = s.replicas * s.tensor_parallel_size * get_gpu(s.gpu).memory_bytes
        gpus_after = turned.replicas * turned.tensor_parallel_size * get_gpu(turned.gpu).memory_bytes
        pe = rec["predicted_effect"]
        with capsys.disabled():
            print(
                f"\n{s.name}: {rec['rule']} {rec['dial']} {rec['current']} → {rec['suggested']}; predicted "
                f"{ {k: (v['before'], v['after']) for k, v in pe.items()} }; simulated goodput "
                f"{before.goodput_ratio:.3f} → {after.goodput_ratio:.3f}, GPU GiB {gpus_before / 2**30:.0f} → "
                f"{gpus_after / 2**30:.0f}, "
                f"preemptions {before.preemptions} → {after.preemptions}"
            )
        if gpus_after < gpus_before:  # a cost cut: goodput must hold
            assert after.goodput_ratio >= before.goodput_ratio - 0.02, s.name
            shrink = [k for k in ("replicas", "gpu_memory_bytes") if k in pe]
            assert shrink and all(pe[k]["after"] < pe[k]["before"] for k in shrink), pe
        else:  # a capacity turn: goodput must rise, as predicted
            assert after.goodput_ratio > before.goodput_ratio, s.name
            grows = [k for k in ("kv_cache_tokens", "kv_cache_tokens_total", "replicas") if k in pe]
            assert grows and all(pe[k]["after"] > pe[k]["before"] for k in grows), pe
        checked += 1
    assert checked >= 2  # the KV-saturated and the over-provisioned deployments both get advice


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_prometheus_scrapes_the_simulated_fleet_and_the_advisor(fleet: RunningFleet, tmp_path: Path) -> None:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.skip("prometheus/promtool absent: run scripts/install-system-deps (Debian's prometheus package)")
    registry, collector, metrics = make_registry()
    svc = Service(_config(fleet), collector, metrics)
    stop = threading.Event()
    urls: list[str] = []
    daemon = threading.Thread(
        target=run_daemon,
        args=(svc, registry, "127.0.0.1:0"),
        kwargs={"stop_event": stop, "on_listening": urls.append},
        daemon=True,
    )
    daemon.start()
    proc = None
    try:
        deadline = time.monotonic() + 10
        while not urls and time.monotonic() < deadline:
            time.sleep(0.1)
        advisor = urls[0].removeprefix("http://")
        jobs = [{"job_name": "advisor", "static_configs": [{"targets": [advisor]}]}]
        for name, url in fleet.targets:
            hostport = url.removeprefix("http://").removesuffix("/metrics")
            jobs.append(
                {
                    "job_name": f"engine-{hostport}",
                    "static_configs": [{"targets": [hostport], "labels": {"deployment": name}}],
                }
            )
        (tmp_path / "prometheus.yml").write_text(
            yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": jobs})
        )
        port = _port()
        with (tmp_path / "prometheus.log").open("w") as log:
            proc = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        api = f"http://127.0.0.1:{port}/api/v1"
        active: list[dict[str, Any]] = []
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            try:
                active = requests.get(f"{api}/targets", timeout=2).json()["data"]["activeTargets"]
            except (requests.RequestException, KeyError, ValueError):
                active = []
            if len(active) == len(jobs) and all(t["health"] == "up" for t in active):
                break
            time.sleep(0.5)
        assert len(active) == len(jobs), active
        bad = [
            (t["labels"].get("job"), t["health"], t["lastError"])
            for t in active
            if t["health"] != "up" or t["lastError"]
        ]
        assert bad == [], bad
        text = requests.get(urls[0] + "/metrics", timeout=5).content
        lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=30)
        assert lint.returncode == 0, (lint.stdout + lint.stderr).decode()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        stop.set()
        daemon.join(timeout=15)
