"""Precisions: bytes per weight parameter and per KV-cache element.

Sources:

* dtype sizes are IEEE/bfloat16 widths (float32 4 bytes, bfloat16/float16 2).
* ``dtype="auto"`` follows vLLM ``ModelConfig`` (``_get_and_verify_dtype`` in ``vllm/config``): the
  checkpoint's ``torch_dtype``, except that a float32 checkpoint is served in bfloat16 (vLLM downcasts
  float32 to a 16-bit type for serving; bfloat16 on GPUs that support it).
* ``--kv-cache-dtype auto`` stores the cache in the model's compute dtype; ``fp8``/``fp8_e4m3``/``fp8_e5m2``
  store one byte per element (vLLM ``CacheConfig``, ``STR_DTYPE_TO_TORCH_DTYPE`` in ``vllm/utils``).
* int4 weight-only methods (AWQ, GPTQ) with group size 128 store 4-bit weights plus, per group of 128
  weights, a 16-bit scale and a zero point. Counting the zero point as 16 bits gives 4 + 32/128 =
  **4.25 bits = 0.53125 bytes** per parameter; AWQ packs zeros at 4 bits (4.156 bits) and GPTQ adds a
  small ``g_idx`` row, so 4.25 is a slightly conservative middle.
* fp8 (W8A8 per-tensor or per-channel scales) and int8 (W8A8 / SmoothQuant) store 1 byte per weight; the
  scales are < 0.1 % and ignored.

Quantization applies to linear layers only; embeddings, LM head and norms stay in the model dtype (vLLM's
default for these methods). :func:`advisor.capacity.kv.weights_bytes_total` combines the two.
"""

from __future__ import annotations

from typing import Final

from advisor.errors import CapacityError

__all__ = [
    "DTYPE_BYTES",
    "INT4_GROUP128_BITS",
    "kv_bytes_per_element",
    "resolve_dtype",
    "weight_bytes_per_param",
]

DTYPE_BYTES: Final[dict[str, int]] = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
}
"""Bytes per element of each unquantized dtype name vLLM accepts for ``--dtype``."""

INT4_GROUP128_BITS: Final = 4.0 + (16 + 16) / 128
"""Bits per parameter of int4 weights with one 16-bit scale and one 16-bit zero per group of 128 (4.25)."""

_QUANT_BYTES: Final[dict[str, float]] = {
    "fp8": 1.0,
    "int8": 1.0,
    "awq": INT4_GROUP128_BITS / 8,
    "gptq": INT4_GROUP128_BITS / 8,
    "awq_marlin": INT4_GROUP128_BITS / 8,
    "gptq_marlin": INT4_GROUP128_BITS / 8,
}

_KV_BYTES: Final[dict[str, int]] = {
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
}


def resolve_dtype(dtype: str, model_dtype: str) -> str:
    """The compute dtype vLLM serves with for ``--dtype`` ``dtype`` and a checkpoint of ``model_dtype``.

    ``auto`` → the checkpoint dtype, except float32 → ``bfloat16`` (vLLM ``_get_and_verify_dtype``).
    ``half`` → ``float16``; ``float`` → ``float32``.

    Raises:
        CapacityError: an unknown dtype name (the message lists the known ones).
    """
    name = dtype.strip().lower()
    if name == "auto":
        model = model_dtype.strip().lower().removeprefix("torch.")
        if model not in DTYPE_BYTES:
            raise CapacityError(f"unknown model dtype {model_dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
        return "bfloat16" if DTYPE_BYTES[model] == 4 else ("float16" if model == "half" else model)
    if name not in DTYPE_BYTES:
        raise CapacityError(f"unknown dtype {dtype!r}; known: auto, {', '.join(sorted(DTYPE_BYTES))}")
    return {"half": "float16", "float": "float32"}.get(name, name)


def weight_bytes_per_param(dtype: str, quantization: str | None, model_dtype: str | None = None) -> float:
    """Bytes per *linear-layer* weight parameter.

    Args:
        dtype: ``bfloat16``, ``float16``, ``float32`` or ``auto`` (``auto`` needs ``model_dtype``, the
            checkpoint's ``torch_dtype``, and resolves as :func:`resolve_dtype`).
        quantization: ``None`` (unquantized: the dtype's width), ``fp8`` or ``int8`` (1 byte), ``awq`` or
            ``gptq`` (int4, group 128: 4.25 bits = 0.53125 bytes; see the module docstring).
        model_dtype: the checkpoint dtype, used only when ``dtype`` is ``auto``.

    Returns:
        bytes per parameter, e.g. 2.0 for bfloat16, 1.0 for fp8, 0.53125 for AWQ.

    Raises:
        CapacityError: unknown dtype or quantization, or ``auto`` without ``model_dtype``.
    """
    if quantization is not None:
        q = quantization.strip().lower()
        if q not in _QUANT_BYTES:
            raise CapacityError(
                f"unknown quantization {quantization!r}; known: None, {', '.join(sorted(_QUANT_BYTES))}"
            )
        return _QUANT_BYTES[q]
    if dtype.strip().lower() == "auto":
        if model_dtype is None:
            raise CapacityError("dtype 'auto' needs the model's torch_dtype (pass model_dtype)")
        return float(DTYPE_BYTES[resolve_dtype("auto", model_dtype)])
    return float(DTYPE_BYTES[resolve_dtype(dtype, model_dtype or "bfloat16")])


def kv_bytes_per_element(kv_cache_dtype: str, model_dtype: str) -> int:
    """Bytes per stored K or V element.

    Args:
        kv_cache_dtype: vLLM ``--kv-cache-dtype``: ``auto`` (the model's compute dtype), ``fp8``,
            ``fp8_e4m3``, ``fp8_e5m2`` (1 byte), ``bfloat16``/``float16`` (2).
        model_dtype: the dtype ``auto`` resolves to; pass the *serving* dtype (see :func:`resolve_dtype`):
            a float32 checkpoint served with ``--dtype auto`` caches in bfloat16 (2 bytes).

    Raises:
        CapacityError: an unknown name (the message lists the known ones).
    """
    name = kv_cache_dtype.strip().lower()
    if name == "auto":
        model = model_dtype.strip().lower().removeprefix("torch.")
        if model not in _KV_BYTES:
            raise CapacityError(f"unknown model dtype {model_dtype!r}; known: {', '.join(sorted(_KV_BYTES))}")
        return _KV_BYTES[model]
    if name not in _KV_BYTES:
        raise CapacityError(f"unknown kv_cache_dtype {kv_cache_dtype!r}; known: auto, {', '.join(sorted(_KV_BYTES))}")
    return _KV_BYTES[name]
