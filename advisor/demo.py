"""``capacity-advisor demo``: the daemon — the same code path as ``run`` — against a built-in stand-in
vLLM engine on loopback that follows a scripted ramp (idle → busy → KV pool saturated → recovered)
ten times faster than real time. No engine, no GPU, no network.
"""

from __future__ import annotations

import logging
from typing import Any

from advisor.capacity.kv import capacity_pass
from advisor.config import Config, capacity_inputs, parse_config
from advisor.exporter import make_registry
from advisor.scheduler import run_daemon
from advisor.service import Service, format_transition
from advisor.standin import StandInEngine, StandInServer

log = logging.getLogger(__name__)

DEMO_DEPLOYMENT = "demo-chat-8b"


def demo_config(target_url: str) -> Config:
    """The demo's config: one Llama-3.1-8B deployment on one H100, checked every second."""
    data: dict[str, Any] = {
        "scrape_interval": "1s",
        "evaluation_window": "5s",
        "deployments": [
            {
                "name": DEMO_DEPLOYMENT,
                "engine": "vllm",
                "targets": [target_url],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "tensor_parallel_size": 1,
                "gpu_memory_utilization": 0.9,
                "max_model_len": 8192,
                "max_num_seqs": 256,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.9},
            }
        ],
        "rules": {
            "kv_saturation": {"for": "3s", "usage_threshold": 0.9, "resolve_below": 0.8},
            "goodput": {"for": "3s", "min_requests": 5},
        },
    }
    return parse_config(data, source="demo")


def run_demo(listen: str, duration: float, speed: float = 10.0) -> int:
    """Start the stand-in engine and the daemon; print URLs and each recommendation transition.

    ``duration`` seconds (0 = until SIGINT/SIGTERM). Returns the exit code.
    """
    placeholder = demo_config("http://127.0.0.1:1/metrics")
    pool = capacity_pass(capacity_inputs(placeholder.deployments[0]))
    engine = StandInEngine(speed=speed, num_gpu_blocks=pool.kv_cache_blocks, block_size=pool.block_size)
    standin = StandInServer(engine)
    standin.start_background()
    cfg = demo_config(standin.url())
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics, on_transition=lambda t: print(format_transition(t), flush=True))

    def announce(url: str) -> None:
        print(
            f"capacity-advisor demo: stand-in vLLM engine at {standin.url()} "
            f"(idle → busy → KV saturated → recovered, {speed:g}× real time)",
            flush=True,
        )
        print(f"  advisor metrics: {url}/metrics", flush=True)
        print(f"  status page:     {url}/", flush=True)
        print(f"  recommendations: {url}/api/v1/recommendations", flush=True)
        print(
            "  (Ctrl-C to stop)" if not duration else f"  (stops after {duration:g}s; Ctrl-C to stop sooner)",
            flush=True,
        )

    try:
        return run_daemon(svc, registry, listen, duration_seconds=duration or None, on_listening=announce)
    finally:
        standin.shutdown()
        standin.server_close()
