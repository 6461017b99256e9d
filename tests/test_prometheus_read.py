"""source: prometheus goes through the same observation step as a scrape (issue 12): a ``served_model`` that
matches nothing is ``served_model_not_found`` naming the models Prometheus holds, and the other deployments go on.

A real Prometheus (the ``stack`` fixture of ``tests/test_prometheus_mode.py``) scrapes a stand-in vLLM engine.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from tests.test_prometheus_mode import stack  # noqa: F401  (the module-scoped fixture)

pytestmark = pytest.mark.integration


def test_served_model_not_found_through_prometheus(stack: tuple[str, str]) -> None:  # noqa: F811
    prom_url, engine_url = stack
    dep: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    cfg = parse_config(
        {
            # 3 s: the request deadline is 0.8 × the interval, and a 0.8 s one timed out on a loaded CI machine
            "scrape_interval": "3s",
            "evaluation_window": "12s",
            "prometheus": {"url": prom_url},
            "deployments": [
                {"name": "wrong", "source": "prometheus", "selector": 'job="vllm"', "served_model": "nope", **dep},
                {"name": "direct-wrong", "targets": [engine_url], "served_model": "nope", **dep},
                {"name": "right", "source": "prometheus", "selector": 'job="vllm"', **dep},
            ],
        }
    )
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics, ignore_for=True)
    try:
        for _ in range(2):
            svc.scrape_once()
            time.sleep(1.0)
        result = svc.evaluate_once()
    finally:
        svc.close()
    wrong, direct, right = (d.as_dict() for d in result.deployments)
    for d in (wrong, direct):
        assert d["state"] == "unavailable", d["snapshot"]["state_reason"]
        (t,) = d["targets"]
        assert t["error_reason"] == "served_model_not_found", t
        assert "meta-llama/Llama-3.1-8B-Instruct" in t["error"]
        assert "served_model_not_found" in d["snapshot"]["state_reason"]
    assert right["state"] == "fresh" and right["snapshot"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    errors = {k: v for k, v in result.scrape_errors.items() if k[2] == "served_model_not_found" and v}
    assert {k[0] for k in errors} == {"direct-wrong"}  # the scrape path counts it per target
