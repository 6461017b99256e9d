"""Named deployments with their traffic, for the demo fleet and the tests (pure).

A :class:`Scenario` is a deployment as the advisor's config describes it (model, GPU, dials, SLO) plus the
traffic the simulator sends it. :data:`DEMO_SCENARIOS` is the demo's fleet, each on Llama-3.1-8B-Instruct and
H100-SXM GPUs, max-model-len 8192 (figures from :func:`advisor.sim.fleet.simulate`, seed 0, 300 s):

======================  ==============================================================================
``healthy``             one replica, util 0.9, Poisson 4 req/s of 1,500 ± 50 % prompt / 300 ± 100 %
                        output tokens: KV mean 3.8 % (peak 9 %), TTFT p99 0.15 s, TPOT p50 7.8 ms,
                        goodput 100 %
``kv-saturated``        one replica, util 0.5 (an 11,910-block pool), bursty Gamma arrivals (gap CV 2) at
                        2.2 req/s of 6,000 ± 25 % / 600 ± 50 % tokens: KV mean 92.5 % (peak 100 %),
                        331 preemptions, TTFT p99 44 s, goodput 11.6 %; the same traffic at util 0.9:
                        KV 67 %, 148 preemptions, goodput 69 %
``over-provisioned``    three replicas, util 0.9, Poisson 0.6 req/s of 800 / 200 tokens: KV < 1 %,
                        0.2 running per replica, goodput 100 %
======================  ==============================================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs, vllm_default_block_size, vllm_default_max_num_seqs
from advisor.capacity.models import get_preset
from advisor.sim.engine import EngineConfig, PrefixCaching, Speculative, engine_config
from advisor.sim.fleet import Router
from advisor.sim.traffic import GammaGaps, LognormalLengths, Poisson, TrafficProfile

__all__ = ["DEMO_SCENARIOS", "Scenario"]

EngineFormat = Literal["vllm", "sglang"]


@dataclass(frozen=True)
class Scenario:
    """One simulated deployment: the engine's dials, its replicas, its traffic and its SLO.

    Field names follow the advisor's config (``deployments[]``); ``model`` is a preset id and ``gpu`` a
    catalog name (the step-time model needs the GPU's bandwidth and FLOP/s). ``engine_format`` picks the
    ``/metrics`` format its replicas serve.
    """

    name: str
    traffic: TrafficProfile
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    gpu: str = "H100-SXM"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 8192
    max_num_seqs: int | None = 256
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    replicas: int = 1
    router: Router = "least-loaded"
    engine_format: EngineFormat = "vllm"
    slo_ttft_seconds: float = 2.5
    slo_tpot_seconds: float = 0.1
    slo_target_ratio: float = 0.9
    prefix_caching: PrefixCaching | None = None
    speculative: Speculative | None = None
    seed: int = 0
    description: str = field(default="", compare=False)

    def capacity_inputs(self) -> CapacityInputs:
        """The capacity pass's inputs (defaults as :func:`advisor.config.capacity_inputs` fills them).

        Raises:
            CapacityError: unknown model or GPU, or invalid dials.
        """
        model = get_preset(self.model)
        gpu = get_gpu(self.gpu)
        return CapacityInputs(
            model=model,
            gpu_memory_bytes=gpu.memory_bytes,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
            quantization=self.quantization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_num_seqs=self.max_num_seqs or vllm_default_max_num_seqs(None, gpu.memory_bytes, gpu.name),
            max_num_batched_tokens=self.max_num_batched_tokens,
            block_size=vllm_default_block_size(model, None),
        )

    def engine_config(self) -> EngineConfig:
        """The replica configuration the simulator runs.

        Raises:
            CapacityError: as :meth:`capacity_inputs`, or the weights do not fit.
        """
        return engine_config(
            self.capacity_inputs(),
            get_gpu(self.gpu),
            model_name=self.model,
            prefix_caching=self.prefix_caching,
            speculative=self.speculative,
        )

    def deployment_fields(self, targets: list[str]) -> dict[str, Any]:
        """A ``deployments[]`` entry of the advisor's config for this scenario, scraping ``targets``."""
        out: dict[str, Any] = {
            "name": self.name,
            "engine": self.engine_format,
            "targets": list(targets),
            "model": self.model,
            "gpu": self.gpu,
            "tensor_parallel_size": self.tensor_parallel_size,
            # the budget under the key the format's engine reads (SGLang refuses vLLM's: advisor.config.BUDGET_KEYS)
            ("gpu_memory_utilization" if self.engine_format == "vllm" else "mem_fraction_static"): (
                self.gpu_memory_utilization
            ),
            "max_model_len": self.max_model_len,
            "kv_cache_dtype": self.kv_cache_dtype,
            "quantization": self.quantization,
            "speculative_decoding": self.speculative is not None,
            "slo": {
                "ttft_seconds": self.slo_ttft_seconds,
                "tpot_seconds": self.slo_tpot_seconds,
                "target_ratio": self.slo_target_ratio,
            },
        }
        if self.max_num_seqs is not None:
            out["max_num_seqs"] = self.max_num_seqs
        if self.max_num_batched_tokens is not None:
            out["max_num_batched_tokens"] = self.max_num_batched_tokens
        return out

    def replace(self, **changes: Any) -> Scenario:
        """A copy with fields changed."""
        return dataclasses.replace(self, **changes)


DEMO_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="healthy",
        traffic=TrafficProfile(Poisson(4.0), LognormalLengths(1500, 0.5, 300, 1.0)),
        description="well inside its KV pool and SLO",
    ),
    Scenario(
        name="kv-saturated",
        gpu_memory_utilization=0.5,
        traffic=TrafficProfile(GammaGaps(2.2, cv=2.0), LognormalLengths(6000, 0.25, 600, 0.5, max_prompt_tokens=7500)),
        description="long prompts in a half-budget pool: KV full, requests wait, preemptions",
    ),
    Scenario(
        name="over-provisioned",
        replicas=3,
        traffic=TrafficProfile(Poisson(0.6), LognormalLengths(800, 0.5, 200, 0.8)),
        description="three replicas for a trickle of short requests",
    ),
)
"""The demo fleet: healthy, KV-saturated and over-provisioned deployments."""
