"""A deployment's ``autoscaling`` section takes 0 where KEDA and the HPA do (``cooldownPeriod: 0``, a scale-down
``stabilizationWindowSeconds`` of 0), and a configuration re-read from its own dump stays valid: ``simulate
--sweep`` re-validates each swept deployment, and the default stabilization of 0 was refused as "duration must be
positive" there."""

from __future__ import annotations

from typing import Any

from advisor.config import Deployment, parse_config

BASE: dict[str, Any] = {
    "name": "chat-8b",
    "engine": "vllm",
    "targets": ["http://127.0.0.1:9/metrics"],
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


def test_zero_windows_are_taken() -> None:
    cfg = parse_config({"deployments": [{**BASE, "autoscaling": {"stabilization": 0, "cooldown_period": "0s"}}]})
    a = cfg.deployments[0].autoscaling
    assert a is not None and (a.stabilization, a.cooldown_period) == (0.0, 0.0)


def test_a_deployment_re_read_from_its_dump_is_valid() -> None:
    dep = parse_config({"deployments": [BASE]}).deployments[0]
    again = Deployment.model_validate(dep.model_dump(by_alias=True))
    assert again.autoscaling == dep.autoscaling
