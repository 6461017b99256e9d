"""The advisor's ``/metrics`` shows each pool's usage under a ``pool`` label and each named queue under a
``queue`` label (issue 12, class 5); an unknown pool is omitted, never exported as 0."""

from __future__ import annotations

from prometheus_client import generate_latest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from tests.states import TwoScrapeServer


def _sglang(queue: int, mamba: float, prealloc: int) -> str:
    labels = 'engine_type="decode",model_name="ai21labs/Jamba-v0.1",tp_rank="0"'
    gauges = {
        "num_running_reqs": 8,
        "num_queue_reqs": queue,
        "full_token_usage": 0.31,
        "mamba_usage": mamba,
        "swa_token_usage": 0.0,
        "max_total_num_tokens": 183240,
        "num_decode_prealloc_queue_reqs": prealloc,
    }
    lines = [f"sglang:{k}{{{labels}}} {v}" for k, v in gauges.items()]
    return "\n".join(lines) + f'\nsglang:generation_tokens_total{{model_name="ai21labs/Jamba-v0.1"}} {1000 + queue}\n'


def test_pool_usage_and_queues_are_exported_with_their_labels() -> None:
    server = TwoScrapeServer(_sglang(5, 0.96, 2), _sglang(9, 0.98, 3))
    cfg = parse_config(
        {
            "deployments": [
                {
                    "name": "d",
                    "engine": "sglang",
                    "targets": [server.url],
                    "model": "ai21labs/Jamba-v0.1",
                    "gpu": "H100-SXM",
                    "tensor_parallel_size": 2,
                    "max_model_len": 65536,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ]
        }
    )
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    try:
        svc.run_once()
        svc.run_once()
    finally:
        svc.close()
        server.stop()
    text = generate_latest(registry).decode()
    assert 'advisor_pool_usage_ratio{deployment="d",pool="kv"} 0.31' in text
    assert 'advisor_pool_usage_ratio{deployment="d",pool="mamba"} 0.98' in text
    assert 'pool="swa"' not in text  # the model has no SWA pool: nothing exported, not 0
    assert 'advisor_queue_requests{deployment="d",queue="decode_prealloc"} 3.0' in text
