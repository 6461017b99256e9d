"""Dial turns as re-runs of the capacity pass.

Every predicted effect a rule reports comes from here: the deployment's :class:`CapacityInputs` with one
dial turned, run through :func:`advisor.capacity.kv.capacity_pass` — the same function
``capacity-advisor plan`` prints, so an operator can reproduce every "after" number with ``plan``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from advisor import conventions as c
from advisor.capacity.engines import memory_budget, with_memory_budget
from advisor.capacity.fixes import POOL_BYTES_STEP
from advisor.capacity.kv import CapacityInputs, CapacityResult, capacity_pass
from advisor.errors import CapacityError

FIELD_FOR_DIAL: dict[str, str] = {
    # dial id → CapacityInputs field the capacity pass reads
    c.DIAL_KV_CACHE_DTYPE: "kv_cache_dtype",
    c.DIAL_GPU_MEMORY_UTILIZATION: "gpu_memory_utilization",
    c.DIAL_KV_CACHE_MEMORY_BYTES: "kv_cache_memory_bytes",
    c.DIAL_WEIGHT_QUANTIZATION: "quantization",
    c.DIAL_TENSOR_PARALLEL_SIZE: "tensor_parallel_size",
    c.DIAL_MAX_MODEL_LEN: "max_model_len",
    c.DIAL_MAX_NUM_SEQS: "max_num_seqs",
    c.DIAL_MAX_NUM_BATCHED_TOKENS: "max_num_batched_tokens",
}


@dataclass(frozen=True, slots=True)
class Turn:
    """One dial turned: the inputs and capacity pass before and after."""

    dial: str
    before_inputs: CapacityInputs
    after_inputs: CapacityInputs
    before: CapacityResult
    after: CapacityResult
    shown: tuple[Any, Any] | None = None
    """The dial's value before and after, where the inputs' field for the dial does not hold them (a pool pinned in
    tokens by another engine's own setting, shown as its bytes per GPU: :func:`token_pin_turn`)."""

    def kv_gain_ratio(self) -> float:
        """KV tokens per replica after ÷ before (1.0 when the pool did not change)."""
        return self.after.kv_cache_tokens / self.before.kv_cache_tokens if self.before.kv_cache_tokens else 1.0

    def values(self) -> tuple[Any, Any]:
        """The dial's value before and after the turn: :attr:`shown`, else the inputs' field for the dial."""
        if self.shown is not None:
            return self.shown
        field_name = FIELD_FOR_DIAL[self.dial]
        return getattr(self.before_inputs, field_name), getattr(self.after_inputs, field_name)


def turned_inputs(inputs: CapacityInputs, dial: str, value: Any) -> CapacityInputs:
    """``inputs`` with ``dial`` set to ``value`` as the engine reads the dial: the budget through the engine's own
    (:func:`with_memory_budget`: TensorRT-LLM's free-memory fraction, else the device share); on llama.cpp the
    sequence cap is ``--parallel``, which splits ``--ctx-size`` over the slots, so it is turned with it (breaker 26:
    ``POST /api/v1/plan`` turned only the cap and answered one 8,192-token request fitting, where ``--parallel 4``
    gives each slot 2,048 cells). Raises ``KeyError`` for a dial the pass does not model, and what the
    :class:`CapacityInputs` check raises."""
    if dial == c.DIAL_GPU_MEMORY_UTILIZATION:
        return with_memory_budget(inputs, value)
    settings = inputs.engine_settings
    if dial == c.DIAL_MAX_NUM_SEQS and inputs.engine == "llamacpp" and settings.parallel is not None:
        return dataclasses.replace(
            inputs, max_num_seqs=value, engine_settings=dataclasses.replace(settings, parallel=value)
        )
    return dataclasses.replace(inputs, **{FIELD_FOR_DIAL[dial]: value})  # validates, may raise


def turn(inputs: CapacityInputs, dial: str, value: Any) -> Turn | None:
    """Re-run the capacity pass with ``dial`` set to ``value``.

    Returns ``None`` when the turned configuration does not fit (weights exceed the budget) — a turn
    that cannot run is no advice. Raises ``KeyError`` for a dial the capacity pass does not model.
    """
    shown: tuple[Any, Any] | None = None
    try:
        after_inputs = turned_inputs(inputs, dial, value)
        if dial == c.DIAL_GPU_MEMORY_UTILIZATION:
            shown = (memory_budget(inputs), value)
        before = capacity_pass(inputs)
        after = capacity_pass(after_inputs)
    except CapacityError:
        return None
    return Turn(dial, inputs, after_inputs, before, after, shown=shown)


def token_pin_turn(inputs: CapacityInputs) -> Turn | None:
    """TensorRT-LLM's ``kv_cache_config.max_tokens`` lifted: the pool the memory fraction alone gives, as the dial
    ``kv_cache_memory_bytes`` (the pool's explicit budget) with its value in bytes per GPU — before, the pinned
    pool; after, the fraction's, in whole MiB (``advisor.capacity.fixes.POOL_BYTES_STEP``). The pool is the smaller
    of the two (``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig``). ``None`` without a pin, or when either
    configuration does not fit."""
    settings = inputs.engine_settings
    if settings.max_tokens is None:
        return None
    after_inputs = dataclasses.replace(inputs, engine_settings=dataclasses.replace(settings, max_tokens=None))
    try:
        before = capacity_pass(inputs)
        after = capacity_pass(after_inputs)
    except CapacityError:
        return None
    pool_after = after.kv_pool_bytes_per_gpu // POOL_BYTES_STEP * POOL_BYTES_STEP
    return Turn(
        c.DIAL_KV_CACHE_MEMORY_BYTES,
        inputs,
        after_inputs,
        before,
        after,
        shown=(int(before.kv_pool_bytes_per_gpu), int(pool_after)),
    )


def effect(before: float | None, after: float | None) -> dict[str, float | None]:
    """``{"before": x, "after": y}`` with floats rounded to 4 significant decimals for readability."""

    def r(v: float | None) -> float | None:
        return None if v is None else round(float(v), 4)

    return {"before": r(before), "after": r(after)}
