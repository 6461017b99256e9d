"""source: prometheus end to end: a real Prometheus scrapes a stand-in engine; the advisor reads the same
engine directly and through Prometheus and must see the same thing."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer

pytestmark = pytest.mark.integration

SATURATED = Phase("saturated", 10_000, 0.97, 48, 12, 3.0, 1500, 300, 1.0, 0.5, 0.05)


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus binary is absent: run scripts/install-system-deps (Debian's prometheus package)")
    engine = StandInServer(StandInEngine(phases=(SATURATED,), speed=1.0, num_gpu_blocks=2000))
    engine.start_background()
    tmp = tmp_path_factory.mktemp("prom")
    target = engine.url().removeprefix("http://").removesuffix("/metrics")
    (tmp / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [{"job_name": "vllm", "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    port = _port()
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            try:
                r = requests.get(f"{url}/api/v1/query", params={"query": "count(vllm:num_requests_running)"}, timeout=2)
                if r.ok and r.json()["data"]["result"]:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(
                "Prometheus did not come up with the engine's series: " + (tmp / "prometheus.log").read_text()[-2000:]
            )
        time.sleep(4)  # a few more scrapes, so the window holds several points
        yield url, engine.url()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
        engine.shutdown()
        engine.server_close()


def test_the_prometheus_source_sees_what_a_scrape_sees(stack: tuple[str, str]) -> None:
    prom_url, engine_url = stack
    dep: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "max_num_seqs": 256,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    cfg = parse_config(
        {
            "scrape_interval": "1s",
            "evaluation_window": "4s",
            "prometheus": {"url": prom_url},
            "deployments": [
                {"name": "direct", "targets": [engine_url], **dep},
                {"name": "via-prometheus", "source": "prometheus", "selector": 'job="vllm"', **dep},
            ],
        }
    )
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics, ignore_for=True)
    try:
        for _ in range(3):
            svc.scrape_once()
            time.sleep(1.0)
        queries_before = svc.prom.queries_made if svc.prom else 0
        svc.scrape_once()
        queries_per_cycle = (svc.prom.queries_made if svc.prom else 0) - queries_before
        result = svc.evaluate_once()
    finally:
        svc.close()
    direct, via = (d.as_dict() for d in result.deployments)
    assert via["engine"] == "vllm"  # detected from the series names Prometheus holds
    assert via["state"] == direct["state"] == "fresh"
    for key in ("requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "model"):
        assert via["snapshot"][key] == direct["snapshot"][key], key
    assert queries_per_cycle == 1  # one range query per deployment per cycle
    assert via["recommendations"] and direct["recommendations"]
    assert via["recommendations"][0]["dial"] == direct["recommendations"][0]["dial"]
    # counters: both see the engine's rate (3 requests/s × 300 tokens) within the 1 s scrape offset
    gen_direct = direct["snapshot"]["generation_tokens_per_second"]
    gen_via = via["snapshot"]["generation_tokens_per_second"]
    assert gen_direct == pytest.approx(900, rel=0.35)
    assert gen_via == pytest.approx(900, rel=0.35)


def test_a_bad_selector_is_a_config_error() -> None:
    from advisor.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "prometheus": {"url": "http://127.0.0.1:9090"},
                "deployments": [
                    {
                        "name": "x",
                        "source": "prometheus",
                        "selector": 'job=vllm"',
                        "model": "meta-llama/Llama-3.1-8B-Instruct",
                        "gpu": "H100",
                        "max_model_len": 8192,
                        "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
                    }
                ],
            }
        )
    assert err.value.problems[0][0] == "deployments[0].selector"


def test_source_prometheus_needs_the_prometheus_section() -> None:
    from advisor.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "deployments": [
                    {
                        "name": "x",
                        "source": "prometheus",
                        "selector": 'job="vllm"',
                        "model": "meta-llama/Llama-3.1-8B-Instruct",
                        "gpu": "H100",
                        "max_model_len": 8192,
                        "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
                    }
                ],
            }
        )
    assert err.value.problems[0][0] == "deployments[0].source"
