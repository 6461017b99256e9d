"""Issue 8, acceptance 2 and 3: the whole chain on loopback, with real servers and a real engine.

Simulated engines of two formats (vLLM and SGLang) and a real llama.cpp server under concurrent load; a real
Prometheus scraping them and the advisor, loaded with ``rules/``; the advisor reading the engines through
Prometheus (``source: prometheus``); a real Alertmanager routing the advisor's alerts to a webhook. Asserts that
the advisor detects each engine kind (llama.cpp included), that a recommendation reaches the webhook through
Alertmanager, that the recording rules produce series, and that every dashboard panel's query returns data.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.sim.scenarios import DEMO_SCENARIOS
from advisor.sim.server import start_fleet
from deploy.grafana.queries import panel_queries
from tests.conftest import REPO_ROOT, Receiver
from tests.e2e.llamacpp import CompletionLoad, LlamaServer, llama_server  # noqa: F401 - the fixture
from tests.e2e.prometheus import free_port, hostport

pytestmark = pytest.mark.integration

VLLM = DEMO_SCENARIOS[1].replace(name="sim-vllm")  # KV-saturated: the advisor has something to say
SGLANG = DEMO_SCENARIOS[0].replace(name="sim-sglang", engine_format="sglang")

# the tiny model llama-server serves (tests/e2e/llamacpp.write_tiny_gguf), as a Hugging Face config.json
TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 259,
    "max_position_embeddings": 512,
    "torch_dtype": "float32",
}


def _start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def _wait(pred: Any, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    pytest.fail(f"timed out waiting for {what}\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def binaries() -> tuple[str, str]:
    prom, am = shutil.which("prometheus"), shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if prom is None or am is None:
        pytest.skip("prometheus / prometheus-alertmanager absent: run scripts/install-system-deps")
    return prom, am


@pytest.fixture
def fleet() -> Iterator[Any]:
    f = start_fleet((VLLM, SGLANG), speed=10.0)
    yield f
    f.stop()


def test_the_whole_chain(
    binaries: tuple[str, str],
    fleet: Any,
    llama_server: LlamaServer,  # noqa: F811 - the fixture imported above
    webhook_receiver: Receiver,
    tmp_path: Path,
) -> None:
    prom_bin, am_bin = binaries
    # --- Alertmanager, routing to the webhook -----------------------------------------------------------
    am_port = free_port()
    (tmp_path / "am.yml").write_text(
        yaml.safe_dump(
            {
                "route": {
                    "receiver": "hook",
                    "group_by": ["deployment"],
                    "group_wait": "1s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [{"name": "hook", "webhook_configs": [{"url": webhook_receiver.url}]}],
            }
        )
    )
    am = _start(
        [
            am_bin,
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",
        ],
        tmp_path / "am.log",
    )
    am_url = f"http://127.0.0.1:{am_port}"
    # --- the advisor, reading through Prometheus ----------------------------------------------------------
    prom_port = free_port()
    prom_url = f"http://127.0.0.1:{prom_port}"
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(TINY_CONFIG))
    deployments = []
    for s in (VLLM, SGLANG):
        d = s.deployment_fields([])
        d.pop("targets")
        d.update({"engine": "auto", "source": "prometheus", "selector": f'deployment="{s.name}"'})
        deployments.append(d)
    deployments.append(
        {
            "name": "llama",
            "source": "prometheus",
            "selector": 'deployment="llama"',
            "model": str(tmp_path / "tiny" / "config.json"),
            "gpu_memory_gib": 1,
            "max_model_len": 512,
            "slo": {"ttft_seconds": 5, "tpot_seconds": 0.5},
        }
    )
    cfg = parse_config(
        {
            "scrape_interval": "1s",
            "evaluation_window": "10s",
            "prometheus": {"url": prom_url},
            "deployments": deployments,
            "receivers": [{"name": "am", "type": "alertmanager", "url": am_url, "resend_interval": "5s"}],
            "rules": {
                "kv_saturation": {"for": "2s"},
                "queue_growth": {"for": "2s"},
                "goodput": {"for": "2s"},
                "resolve_for": "2s",
            },
        }
    )
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    stop = threading.Event()
    urls: list[str] = []
    daemon = threading.Thread(
        target=run_daemon,
        args=(svc, registry, "127.0.0.1:0"),
        kwargs={"stop_event": stop, "on_listening": urls.append},
        daemon=True,
    )
    daemon.start()
    prom: subprocess.Popen[bytes] | None = None
    load = CompletionLoad(llama_server.url, concurrency=6, max_requests=2000, max_seconds=90)
    try:
        _wait(lambda: bool(urls), 10, "the advisor to listen")
        advisor = urls[0]
        # --- Prometheus, scraping the engines and the advisor, with rules/ ------------------------------------
        jobs: list[dict[str, Any]] = [{"job_name": "advisor", "static_configs": [{"targets": [hostport(advisor)]}]}]
        for name, url in fleet.targets:
            jobs.append(
                {
                    "job_name": f"engine-{hostport(url)}",
                    "static_configs": [{"targets": [hostport(url)], "labels": {"deployment": name}}],
                }
            )
        jobs.append(
            {
                "job_name": "llamacpp",
                "static_configs": [{"targets": [hostport(llama_server.url)], "labels": {"deployment": "llama"}}],
            }
        )
        rule_files = sorted(str(p) for p in (REPO_ROOT / "rules").glob("*.yml"))
        (tmp_path / "prometheus.yml").write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": rule_files,
                    "scrape_configs": jobs,
                }
            )
        )
        prom = _start(
            [
                prom_bin,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            tmp_path / "prometheus.log",
        )
        load.start()
        start = time.time()

        def targets_up() -> bool:
            active = requests.get(f"{prom_url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
            return len(active) == len(jobs) and all(t["health"] == "up" for t in active)

        _wait(targets_up, 60, "every target up in Prometheus", tmp_path / "prometheus.log")

        # 1. the advisor detects each engine kind, llama.cpp included
        def engines() -> dict[str, str]:
            deps = requests.get(advisor + "/api/v1/deployments", timeout=5).json()["deployments"]
            return {d["name"]: d["engine"] for d in deps}

        _wait(
            lambda: engines() == {"sim-vllm": "vllm", "sim-sglang": "sglang", "llama": "llamacpp"},
            60,
            f"engine detection (now {engines()})",
        )

        # 2. a recommendation reaches the webhook through Alertmanager
        def delivered() -> bool:
            return any(
                a["labels"].get("deployment") == "sim-vllm"
                for b in webhook_receiver.bodies
                for a in b.get("alerts", [])
            )

        _wait(delivered, 60, "a recommendation at the webhook through Alertmanager", tmp_path / "am.log")
        alert = next(a for b in webhook_receiver.bodies for a in b["alerts"] if a["labels"]["deployment"] == "sim-vllm")
        assert alert["labels"]["alertname"] == "CapacityAdvisorRecommendation"
        assert alert["annotations"]["summary"]

        # 3. the recording rules produce series for every engine kind
        def recorded(name: str) -> set[str]:
            r = requests.get(f"{prom_url}/api/v1/query", params={"query": name}, timeout=5).json()
            return {s["metric"].get("deployment", "") for s in r["data"]["result"]}

        _wait(
            lambda: recorded("deployment:llm_requests_running:sum") >= {"sim-vllm", "sim-sglang", "llama"},
            30,
            "recording rules over all three engines",
        )
        _wait(lambda: "sim-vllm" in recorded("deployment:llm_ttft_seconds:p90_rate5m"), 30, "TTFT quantiles")

        # 4. every dashboard panel's query returns data from this Prometheus (asked again every 0.5 s for up to
        # 60 s, not after a fixed 5 s: a rate needs two scrapes in its range, which the waits above may have given)
        deadline = time.monotonic() + 60
        while True:
            empty = []
            for q in panel_queries("sim-vllm", rate_interval="30s", interval="1s", range_="5m"):
                params = {"query": q.expr, "start": start, "end": time.time(), "step": 1}
                r = requests.get(f"{prom_url}/api/v1/query_range", params=params, timeout=10).json()
                assert r["status"] == "success", (q.panel, q.expr, r)
                if not r["data"]["result"]:
                    empty.append((q.dashboard, q.panel, q.expr))
            if not empty or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert empty == [], empty
    finally:
        load.stop()
        stop.set()
        daemon.join(timeout=20)
        if prom is not None:
            _stop(prom)
        _stop(am)
