"""Data quality and detection through `once --json`: frozen engines, restarts, engine: auto, model drift."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, reply
from tests.inprocess import run_cli

Start = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


def _vllm(
    running: float,
    waiting: float,
    usage: float,
    prompt: float,
    gen: float,
    preempt: float,
    start: float = 1_790_000_000.0,
    blocks: int = 2000,
) -> bytes:
    lab = '{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}'
    return (
        f"process_start_time_seconds {start}\n"
        f"vllm:num_requests_running{lab} {running}\n"
        f"vllm:num_requests_waiting{lab} {waiting}\n"
        f"vllm:kv_cache_usage_perc{lab} {usage}\n"
        f"vllm:prompt_tokens_total{lab} {prompt}\n"
        f"vllm:generation_tokens_total{lab} {gen}\n"
        f"vllm:num_preemptions_total{lab} {preempt}\n"
        f'vllm:cache_config_info{{block_size="16",engine="0",num_gpu_blocks="{blocks}"}} 1.0\n'
    ).encode()


def _once(tmp_path: Path, target: str, extra: str = "") -> dict:  # type: ignore[type-arg]
    cfg = tmp_path / "a.yaml"
    cfg.write_text(
        f"""
deployments:
  - name: d
    targets: ["{target}"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    max_num_seqs: 256
    slo: {{ttft_seconds: 2.5, tpot_seconds: 0.1}}
{extra}"""
    )
    r = run_cli("once", "--config", str(cfg), "--interval", "1", "--json")
    assert r.returncode == 0, r.stderr
    (d,) = json.loads(r.stdout)["deployments"]
    return d  # type: ignore[no-any-return]


def test_a_frozen_engine_is_stale_and_gets_no_capacity_advice(http_server: Start, tmp_path: Path) -> None:
    # 106 running, 15 waiting, KV 90 %, but the token counters never move (a hung engine)
    body = _vllm(106, 15, 0.9, 5_000_000, 700_000, 40)
    d = _once(tmp_path, http_server(lambda h: reply(h, 200, body)) + "/metrics")
    assert d["state"] == "stale"
    assert "frozen" in d["snapshot"]["state_reason"]
    assert d["recommendations"] == []  # once sees one interval; the stalled rule needs three by default
    # no capacity rule reads a frozen engine's gauges; the stalled rule (issue 13) is the one that does
    assert all(r["state"] == "unknown" for r in d["rules"] if r["rule"] != "stalled")
    # two scrapes see one interval and the rule needs three: it says it cannot tell, it does not say "no stall"
    (stalled,) = [r for r in d["rules"] if r["rule"] == "stalled"]
    assert stalled["state"] == "unknown" and "needs 3" in stalled["reason"] and "sees 1" in stalled["reason"]


def test_a_restarted_engine_is_fresh_and_its_reset_counters_raise_no_advice(http_server: Start, tmp_path: Path) -> None:
    calls = {"n": 0}
    lock = threading.Lock()

    def handle(h: BaseHTTPRequestHandler) -> None:
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n == 1:  # before the restart: large cumulative counters
            reply(h, 200, _vllm(20, 0, 0.3, 9_000_000, 800_000, 500))
        else:  # after: a new process, counters from zero
            reply(h, 200, _vllm(20, 0, 0.3, 4_000, 900, 0, start=1_790_000_100.0))

    d = _once(tmp_path, http_server(handle) + "/metrics")
    assert d["state"] == "fresh"
    assert d["recommendations"] == []
    s = d["snapshot"]
    assert s["preemptions_per_second"] is not None and s["preemptions_per_second"] >= 0
    assert s["generation_tokens_per_second"] is not None and s["generation_tokens_per_second"] >= 0


def test_model_error_ratio_compares_the_capacity_pass_with_the_engine(http_server: Start, tmp_path: Path) -> None:
    counter = {"g": 1000.0}

    def handle(h: BaseHTTPRequestHandler) -> None:
        counter["g"] += 500
        reply(h, 200, _vllm(10, 0, 0.2, 10 * counter["g"], counter["g"], 0, blocks=2000))

    d = _once(tmp_path, http_server(handle) + "/metrics")
    plan = run_cli(
        "plan",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100-SXM",
        "--max-model-len",
        "8192",
        "--max-num-seqs",
        "256",
        "--json",
    )
    predicted = json.loads(plan.stdout)["kv_cache_tokens"]
    s = d["snapshot"]
    assert s["kv_cache_capacity_tokens"] == 2000 * 16
    assert s["capacity_model_error_ratio"] == pytest.approx(predicted / 32_000 - 1)


def test_engine_auto_detects_sglang_and_reads_the_served_model(http_server: Start, tmp_path: Path) -> None:
    body = (REPO_ROOT / "tests/fixtures/sglang/old-0.4-percent-nan-two-models.prom").read_bytes()
    url = http_server(lambda h: reply(h, 200, body)) + "/metrics"
    cfg_extra = ""
    d = _once(tmp_path, url, cfg_extra)
    assert d["engine"] == "sglang"
    # two models and none named (the deployment's model is neither): never a guess (issue 12, class 1)
    assert d["state"] == "unavailable"
    (target,) = d["targets"]
    assert target["error_reason"] == "served_model_not_found", target
    assert "2 models (a, b)" in json.dumps(d), d
    text = (
        (tmp_path / "a.yaml")
        .read_text()
        .replace("    max_num_seqs: 256\n", "    max_num_seqs: 256\n    served_model: b\n")
    )
    (tmp_path / "a.yaml").write_text(text)
    r = run_cli("once", "--config", str(tmp_path / "a.yaml"), "--interval", "1", "--json")
    (d,) = json.loads(r.stdout)["deployments"]
    assert d["snapshot"]["model"] == "b"
    assert (d["snapshot"]["requests_running"], d["snapshot"]["requests_waiting"]) == (5, 2)
    assert d["snapshot"]["kv_cache_usage_ratio"] == 0.5


def test_engine_auto_on_a_non_engine_says_so(http_server: Start, tmp_path: Path) -> None:
    url = http_server(lambda h: reply(h, 200, b"node_load1 0.5\n")) + "/metrics"
    d = _once(tmp_path, url)
    assert d["state"] == "unavailable"
    # valid text, but no engine's families: its own state, naming the prefixes seen (issue 12, class 2)
    assert d["targets"][0]["error_reason"] == "unrecognized"
    assert "no known engine's metrics" in d["targets"][0]["error"]
    assert "node_" in d["targets"][0]["error"]


def test_model_error_and_target_state_are_exported(http_server: Start) -> None:
    from advisor.config import parse_config
    from advisor.exporter import make_registry
    from advisor.service import Service

    body = _vllm(10, 0, 0.2, 1000, 100, 0, blocks=2000)
    url = http_server(lambda h: reply(h, 200, body)) + "/metrics"
    cfg = parse_config(
        {
            "deployments": [
                {
                    "name": "d",
                    "targets": [url],
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ]
        }
    )
    from prometheus_client import generate_latest

    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    try:
        svc.run_once()
    finally:
        svc.close()
    text = generate_latest(registry).decode()
    assert 'advisor_capacity_model_error_ratio{deployment="d"}' in text
    assert f'advisor_target_state{{deployment="d",state="fresh",target="{url}"}} 1.0' in text
