"""Builders for rule inputs with explicit, hand-chosen numbers."""

from __future__ import annotations

from typing import Any

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.rules.base import DeploymentContext, Evaluation, SLOTargets
from advisor.telemetry import GoodputEstimate, WindowStats

GIB = 1024**3


def context(replicas: int = 1, **overrides: Any) -> DeploymentContext:
    """Llama-3.1-8B on one H100-SXM at 0.9, 8192 context, unless overridden."""
    gpu = get_gpu("H100-SXM")
    fields: dict[str, Any] = {
        "model": get_preset("meta-llama/Llama-3.1-8B-Instruct"),
        "gpu_memory_bytes": gpu.memory_bytes,
        "gpu_memory_utilization": 0.9,
        "max_model_len": 8192,
    }
    fields.update(overrides)
    inputs = CapacityInputs(**fields)
    return DeploymentContext(
        name="chat-8b",
        engine="vllm",
        slo=SLOTargets(2.5, 0.1, 0.9),
        inputs=inputs,
        capacity=capacity_pass(inputs),
        gpu=gpu,
        replicas=replicas,
    )


def evaluation(
    now: float = 1000.0,
    state: str = "fresh",
    ctx: DeploymentContext | None = None,
    goodput: tuple[float | None, float | None] = (None, None),
    replicas_up: int = 1,
    kv_capacity_tokens: float | None = 432_000,
    **stats: Any,
) -> Evaluation:
    """An evaluation with WindowStats fields given as keyword arguments (window 60 s by default)."""
    stats.setdefault("window_seconds", 60.0)
    ws = WindowStats(**stats)
    g = goodput[0]
    return Evaluation(
        ctx=ctx or context(),
        state=state,
        stats=ws,
        replicas_up=replicas_up,
        kv_capacity_tokens=kv_capacity_tokens,
        kv_capacity_source="engine" if kv_capacity_tokens else "model",
        ttft_ok=None,
        tpot_ok=None,
        goodput=GoodputEstimate(g, goodput[1], g, g, 1.0 if g is not None else None),
        goodput_tokens_per_second=None,
        samples=5,
        expected_samples=5,
        now=now,
    )
