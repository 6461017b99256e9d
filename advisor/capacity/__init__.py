"""The capacity pass: a PURE package (no I/O but its own package data, no clock, no network).

Layout (each step usable on its own)::

    models      config.json / preset → ModelArch (layers, heads, KV heads, head_dim, parameters)
    precision   dtype / quantization → bytes per weight and per KV element
    hardware    GPU name → GPUSpec (CUDA-reported memory, bandwidth, FLOP/s, interconnect)
    kv          CapacityInputs → CapacityResult (weights, overhead, KV pool, blocks, tokens, ceiling)
      profiles    overhead models, version gates, sampler defaults by vLLM release
      inputs      CapacityInputs (with vLLM's start-up checks), EngineSettings, CapacityResult
      kvlayout    KV bytes per token, layers per stage, concurrency, hybrid KV groups
      weights     weights per GPU (TP/PP split, MLA copies, MXFP4 padding, draft, LoRA, CPU offload)
      overhead    activation peak, non-torch memory, CUDA-graph estimate
    perf        roofline: decode step / TPOT / decode tokens/s / prefill seconds
    queueing    Erlang C, M/M/c wait, replicas needed

Errors raised: :class:`advisor.errors.CapacityError` and its subclasses ``UnknownModelError`` and
``UnknownGPUError``.
"""

from typing import TYPE_CHECKING

from advisor.capacity.hardware import GIB, GPUSpec, get_gpu, gpu_names
from advisor.capacity.kv import (
    OVERHEAD_PROFILES,
    CapacityInputs,
    CapacityResult,
    OverheadModel,
    capacity_pass,
)
from advisor.capacity.models import ModelArch, get_preset, preset_ids
from advisor.capacity.precision import kv_bytes_per_element, weight_bytes_per_param

if TYPE_CHECKING:
    from advisor.capacity.perf import (
        PerfAssumptions,
        decode_step_seconds,
        decode_tokens_per_second,
        prefill_seconds,
        tpot_seconds,
    )
    from advisor.capacity.queueing import erlang_c, mean_queue_wait_seconds, replicas_needed

_LAZY = {
    "PerfAssumptions": "perf",
    "decode_step_seconds": "perf",
    "decode_tokens_per_second": "perf",
    "prefill_seconds": "perf",
    "tpot_seconds": "perf",
    "erlang_c": "queueing",
    "mean_queue_wait_seconds": "queueing",
    "replicas_needed": "queueing",
}
"""Names re-exported from :mod:`~advisor.capacity.perf` and :mod:`~advisor.capacity.queueing`, imported on first
use: ``capacity-advisor plan`` (the KV pass alone) does not load them at start."""


def __getattr__(name: str) -> object:
    """A name of :data:`_LAZY`, imported from its module on first use.

    Raises:
        AttributeError: no such name in the package.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "GIB",
    "OVERHEAD_PROFILES",
    "CapacityInputs",
    "CapacityResult",
    "GPUSpec",
    "ModelArch",
    "OverheadModel",
    "PerfAssumptions",
    "capacity_pass",
    "decode_step_seconds",
    "decode_tokens_per_second",
    "erlang_c",
    "get_gpu",
    "get_preset",
    "gpu_names",
    "kv_bytes_per_element",
    "mean_queue_wait_seconds",
    "prefill_seconds",
    "preset_ids",
    "replicas_needed",
    "tpot_seconds",
    "weight_bytes_per_param",
]
