"""Precisions: bytes per weight parameter and per KV-cache element.

Sources:

* dtype sizes are IEEE/bfloat16 widths (float32 4 bytes, bfloat16/float16 2).
* ``dtype="auto"`` follows vLLM ``ModelConfig`` (``_get_and_verify_dtype`` in ``vllm/config``): the
  checkpoint's ``torch_dtype``, except that a float32 checkpoint is served in bfloat16 (vLLM downcasts
  float32 to a 16-bit type for serving; bfloat16 on GPUs that support it).
* ``--kv-cache-dtype auto`` stores the cache in the model's compute dtype; ``fp8``/``fp8_e4m3``/``fp8_e5m2``
  store one byte per element (vLLM ``CacheConfig``, ``STR_DTYPE_TO_TORCH_DTYPE`` in ``vllm/utils``).
* int4 weight-only methods with group size 128 store 4-bit weights plus, per group of 128 weights along the
  input dimension, a 16-bit scale and a 4-bit packed zero point (AutoAWQ ``qzeros`` and GPTQ ``qzeros`` are
  int32 words holding eight 4-bit zeros; vLLM ``awq.py``/``gptq.py`` create ``scales`` [in/128, out] fp16 and
  ``qzeros`` [in/128, out/8] int32): 4 + (16 + 4) / 128 = **4.15625 bits = 0.51953 bytes** per parameter.
  GPTQ's ``g_idx`` (one int32 per input row, i.e. 32 / out_features bits per weight) is < 0.01 bit and ignored.
* ``fp8``: 1 byte per weight. Block-quantized fp8 checkpoints (DeepSeek-V3/R1, Qwen3-FP8:
  ``weight_block_size [128, 128]``) add one fp32 ``weight_scale_inv`` per 128×128 block: 1 + 4/16384 bytes.
  Per-tensor / per-channel scales (W8A8) are < 0.1 % and ignored; ``int8`` is 1 byte.
* ``mxfp4`` (OCP Microscaling, GPT-OSS experts): 4-bit E2M1 elements with one 8-bit E8M0 scale per block of 32:
  4 + 8/32 = **4.25 bits**. ``nvfp4`` (NVIDIA ModelOpt): 4-bit E2M1 with one FP8 E4M3 scale per block of 16
  plus a per-tensor fp32 scale: 4 + 8/16 = **4.5 bits**.

GPT-OSS quantizes only its MoE experts (``quantization_config.modules_to_not_convert`` lists attention,
router, embeddings and LM head), which :data:`EXPERTS_ONLY` records.

Quantization applies to linear layers only; embeddings, LM head and norms stay in the model dtype (vLLM's
default for these methods). :func:`advisor.capacity.kv.weights_bytes_total` combines the two.
"""

from __future__ import annotations

from typing import Final

from advisor.errors import CapacityError

__all__ = [
    "DTYPE_BYTES",
    "EXPERTS_ONLY",
    "FP8_BLOCK_BYTES",
    "INT4_GROUP128_BITS",
    "INT_WEIGHT_BITS",
    "INT_WEIGHT_METHODS",
    "MXFP4_BITS",
    "NVFP4_BITS",
    "int_weight_bits",
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

INT_WEIGHT_METHODS: Final = frozenset({"gptq", "awq", "gptq_marlin", "awq_marlin"})
"""Integer weight-only methods whose width and group size the checkpoint's ``quantization_config`` states."""
INT_WEIGHT_BITS: Final = frozenset({2, 3, 4, 8})
"""Weight widths GPTQ checkpoints are written in and vLLM's GPTQ kernels load (``gptq.py``
``GPTQConfig.__init__``: ``weight_bits`` must be 2, 3, 4 or 8; AWQ only 4)."""


def int_weight_bits(bits: int, group_size: int) -> float:
    """Bits per parameter of a GPTQ/AWQ linear layer of ``bits``-wide weights quantized in groups of
    ``group_size`` input rows (``-1``: one group per column).

    vLLM's ``gptq.py``/``awq.py`` create, for an ``in × out`` layer, ``qweight`` (``in × out × bits`` bits packed
    in int32), ``scales`` (``in / group_size × out`` float16) and ``qzeros`` (``in / group_size × out`` zeros
    of ``bits`` bits, packed in int32): ``bits + (16 + bits) / group_size`` per parameter, 4.15625 for int4 in
    groups of 128, 8.1875 for int8. Per-column scales (``group_size`` -1) are one pair per column: ``bits`` (their
    ``(16 + bits) / in`` is under 0.01 bit). ``g_idx`` (one int32 per input row) is ignored likewise.
    """
    return float(bits) if group_size == -1 else bits + (16 + bits) / group_size


INT4_GROUP128_BITS: Final = int_weight_bits(4, 128)
"""Bits per parameter of int4 weights with one 16-bit scale and one 4-bit zero per group of 128 (4.15625)."""

MXFP4_BITS: Final = 4.0 + 8 / 32
"""Bits per parameter of MXFP4: E2M1 elements, one E8M0 scale per 32 (4.25)."""

NVFP4_BITS: Final = 4.0 + 8 / 16
"""Bits per parameter of NVFP4: E2M1 elements, one E4M3 scale per 16 (4.5)."""

FP8_BLOCK_BYTES: Final = 1.0 + 4 / (128 * 128)
"""Bytes per parameter of block-quantized fp8: one fp32 scale per 128×128 block."""

_QUANT_BYTES: Final[dict[str, float]] = {
    "fp8": FP8_BLOCK_BYTES,
    "int8": 1.0,
    "awq": INT4_GROUP128_BITS / 8,
    "gptq": INT4_GROUP128_BITS / 8,
    "awq_marlin": INT4_GROUP128_BITS / 8,
    "gptq_marlin": INT4_GROUP128_BITS / 8,
    "mxfp4": MXFP4_BITS / 8,
    "nvfp4": NVFP4_BITS / 8,
    "modelopt_fp4": NVFP4_BITS / 8,
}

EXPERTS_ONLY: Final = frozenset({"mxfp4"})
"""Methods that checkpoints apply to the MoE experts only (GPT-OSS); other linear layers stay 16-bit."""

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
        quantization: ``None`` (unquantized: the dtype's width), ``fp8`` (1 + 4/16384 bytes) or ``int8`` (1),
            ``awq`` or ``gptq`` (int4, group 128: 4.15625 bits = 0.51953 bytes), ``mxfp4`` (4.25 bits),
            ``nvfp4`` (4.5 bits); see the module docstring.
        model_dtype: the checkpoint dtype, used only when ``dtype`` is ``auto``.

    Returns:
        bytes per parameter, e.g. 2.0 for bfloat16, 1.000244 for fp8, 0.51953 for AWQ.

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
