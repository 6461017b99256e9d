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

* ``bitsandbytes`` (vLLM ``quantization/bitsandbytes.py`` ``BitsAndBytesLinearMethod.create_weights`` and
  ``model_loader/bitsandbytes_loader.py``): 4-bit (NF4 or FP4) packs two weights per byte (``qweight`` of
  ``in × out / 2`` uint8) and keeps one fp32 ``absmax`` per block of 64 weights (bitsandbytes ``quantize_4bit``
  ``blocksize=64``; transformers' ``BitsAndBytesConfig`` has no key to change it). A double-quantized
  (``bnb_4bit_use_double_quant``, nested) checkpoint stores its absmax as uint8 plus one fp32 absmax per 256 of them
  (bitsandbytes ``quantize_4bit(compress_statistics=True)``: ``quantize_blockwise(absmax, blocksize=256)``), and an
  unquantized checkpoint served with ``--quantization bitsandbytes`` is quantized in flight the same way
  (``_unquantized_generator``: ``quantize_4bit(compress_statistics=True, quant_type="nf4")``). vLLM 0.9.2 added
  ``dequantize_dq`` (``model_loader/bitsandbytes_loader.py``), which turns nested absmax back into fp32 at load;
  before it (0.7.2-0.9.1 ``model_loader/loader.py`` / ``bitsandbytes_loader.py``, ``QuantState.from_dict``) they
  stay nested on the GPU. So a 4-bit layer costs **0.5 + 4/64 = 0.5625 bytes** per parameter when not nested or
  from 0.9.2, and **0.5 + 1/64 + 4/(64 × 256) = 0.51587** when nested before 0.9.2 (:func:`bnb_4bit_bytes`).
  Unsloth replaces ``dequantize_dq`` with a no-op (unslothai/unsloth-zoo ``unsloth_zoo/vllm_utils.py`` at
  752a92168676b95fbef4690db45f0bd4206b47d9, "vLLM dequantizes the Double quant scalars on the fly. We disable
  this"), so vLLM run inside Unsloth keeps them nested on every release; ``plan`` has no input for that and
  follows vLLM. 8-bit (LLM.int8, ``load_in_8bit``): one int8 per weight (``Int8Params``) plus
  one fp32 absmax per output row (``SCB``): ``1 + 4 / in_features`` bytes (:func:`bnb_8bit_bytes`).
* MXFP4 on the Marlin kernel pads the expert shapes (:func:`mxfp4_padded_expert_shape`).

GPT-OSS quantizes only its MoE experts (``quantization_config.modules_to_not_convert`` lists attention,
router, embeddings and LM head), which :data:`EXPERTS_ONLY` records.

Quantization applies to linear layers only; embeddings, LM head and norms stay in the model dtype (vLLM's
default for these methods). :func:`advisor.capacity.kv.weights_bytes_total` combines the two.
"""

from __future__ import annotations

from typing import Final

from advisor.capacity.generation import parse_version
from advisor.errors import CapacityError, UnknownNameError

__all__ = [
    "BNB_4BIT_BYTES",
    "BNB_4BIT_NESTED_BYTES",
    "BNB_DEQUANTIZE_DQ_SINCE",
    "CHECKPOINT_ONLY_METHODS",
    "DTYPE_BYTES",
    "EXPERTS_ONLY",
    "FP8_BLOCK_BYTES",
    "INT4_GROUP128_BITS",
    "INT_WEIGHT_BITS",
    "INT_WEIGHT_METHODS",
    "MXFP4_BITS",
    "NVFP4_BITS",
    "QUANTIZATION_METHODS",
    "bnb_4bit_bytes",
    "bnb_8bit_bytes",
    "device_support_problems",
    "int_weight_bits",
    "kv_bytes_per_element",
    "model_dtype_name",
    "mxfp4_moe_backend",
    "mxfp4_padded_expert_shape",
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

BNB_4BIT_BLOCK: Final = 64
"""Weights per fp32 ``absmax`` of a bitsandbytes 4-bit layer (``quantize_4bit`` ``blocksize=64``)."""

BNB_4BIT_BYTES: Final = 0.5 + 4 / BNB_4BIT_BLOCK
"""Bytes per parameter of a bitsandbytes 4-bit layer with fp32 absmax: two weights per byte plus an fp32 absmax per
64 (0.5625): a checkpoint without double quantization, or any 4-bit layer from vLLM 0.9.2 (``dequantize_dq``)."""

BNB_4BIT_NESTED_BLOCK: Final = 256
"""absmax per fp32 ``state2.absmax`` of a double-quantized (nested) bitsandbytes 4-bit layer (bitsandbytes 0.45.3
``functional.quantize_4bit``: ``compress_statistics`` → ``quantize_blockwise(absmax, blocksize=256)``; transformers
saves it as ``nested_blocksize`` 256)."""

BNB_4BIT_NESTED_BYTES: Final = 0.5 + 1 / BNB_4BIT_BLOCK + 4 / (BNB_4BIT_BLOCK * BNB_4BIT_NESTED_BLOCK)
"""Bytes per parameter of a nested bitsandbytes 4-bit layer: two weights per byte, a uint8 absmax per 64 and an fp32
absmax per 64 × 256 (0.515869; the 256-entry code and the offset per layer are ignored)."""

BNB_DEQUANTIZE_DQ_SINCE: Final = (0, 9, 2)
"""First vLLM release whose bitsandbytes loader dequantizes nested absmax to fp32 at load (``dequantize_dq`` in
``vllm/model_executor/model_loader/bitsandbytes_loader.py``; absent from the 0.9.1 wheel, called for every 4-bit
parameter's quant states in 0.9.2 and 0.10.0)."""


def bnb_4bit_bytes(*, nested: bool, release: tuple[int, ...] | None) -> float:
    """Bytes per parameter of a bitsandbytes 4-bit layer as vLLM ``release`` holds it on the GPU.

    ``nested``: the absmax were double-quantized (a checkpoint whose ``quantization_config`` states
    ``bnb_4bit_use_double_quant`` true, or in-flight quantization, which always passes ``compress_statistics=True``).
    Nested absmax stay uint8 before :data:`BNB_DEQUANTIZE_DQ_SINCE` (:data:`BNB_4BIT_NESTED_BYTES`) and are fp32
    from it (:data:`BNB_4BIT_BYTES`); ``release`` None (no version given) follows the newest releases.
    Llama-3.1-8B's 6,979,321,856 linear parameters, nested, vLLM 0.7.2: 3,600,416,768 bytes (3.353 GiB)."""
    dequantized = release is None or release >= BNB_DEQUANTIZE_DQ_SINCE
    return BNB_4BIT_NESTED_BYTES if nested and not dequantized else BNB_4BIT_BYTES


def bnb_8bit_bytes(in_features: int) -> float:
    """Bytes per parameter of a bitsandbytes 8-bit (LLM.int8) layer of ``in_features`` inputs: one int8 weight plus
    one fp32 row scale (``SCB``) per output row, ``1 + 4 / in_features`` (1.00098 at 4,096)."""
    return 1.0 + 4 / in_features


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
    "bitsandbytes": BNB_4BIT_BYTES,
}

QUANTIZATION_METHODS: Final = frozenset(_QUANT_BYTES)
"""The weight quantization methods the capacity pass has a width for (``--quantization``, or a checkpoint's own)."""

EXPERTS_ONLY: Final = frozenset({"mxfp4"})
"""Methods that checkpoints apply to the MoE experts only (GPT-OSS); other linear layers stay 16-bit."""


QUANTIZATION_MIN_CAPABILITY: Final[dict[str, tuple[int, int]]] = {"mxfp4": (8, 0), "awq": (7, 5)}
"""The lowest CUDA compute capability whose GPU vLLM loads a method on (``QuantizationConfig.get_min_capability``:
``quantization/mxfp4.py`` ``Mxfp4Config`` 80 from 0.10.1 to 0.21; ``quantization/awq.py`` ``AWQConfig`` 75, "The AWQ
kernel only supports Turing or newer GPUs"). Below it vLLM refuses to start (``vllm/config/vllm.py``
``_get_quantization_config``: "The quantization method mxfp4 is not supported for the current GPU. Minimum
capability: 80. Current capability: 70.", vllm-project/vllm#22422)."""

BFLOAT16_MIN_CAPABILITY: Final = (8, 0)
"""bfloat16 needs compute capability 8.0 (Ampere): vLLM's worker refuses ``--dtype bfloat16`` below it
(``platforms/cuda.py`` ``check_if_supports_dtype``, V0 ``worker.py`` ``_check_if_gpu_supports_dtype``: "Bfloat16 is only
supported on GPUs with compute capability of at least 8.0 … You can use float16 instead by explicitly setting the
`dtype` flag in CLI, for example: --dtype=half"); ``auto`` falls back to float16 there (same width)."""


def device_support_problems(dtype: str, quantization: str | None, capability: tuple[int, int] | None) -> list[str]:
    """What vLLM refuses to run on a GPU of ``capability`` (None: unknown, nothing refused): an explicit
    ``bfloat16`` dtype below :data:`BFLOAT16_MIN_CAPABILITY`, a quantization method below its
    :data:`QUANTIZATION_MIN_CAPABILITY`. One message per problem, naming the flag."""
    if capability is None:
        return []
    cc = f"{capability[0]}.{capability[1]}"
    problems: list[str] = []
    if dtype.strip().lower() == "bfloat16" and capability < BFLOAT16_MIN_CAPABILITY:
        problems.append(
            f"dtype bfloat16 (--dtype): the GPU's compute capability {cc} has no bfloat16 and vLLM refuses it "
            "(needs 8.0); use --dtype float16"
        )
    q = (quantization or "").strip().lower()
    low = QUANTIZATION_MIN_CAPABILITY.get(q)
    if low is not None and capability < low:
        problems.append(
            f"quantization {q} (--quantization, or the checkpoint's quantization_config) needs compute capability "
            f"{low[0]}.{low[1]}; vLLM refuses it on this GPU's {cc} (\"The quantization method {q} is not supported "
            'for the current GPU")'
        )
    return problems


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


MXFP4_TRITON_ON_HOPPER_SINCE: Final = (0, 12)
"""The first vLLM release whose pip wheel and image bundle OpenAI's ``triton_kernels`` (``vllm/third_party/
triton_kernels``, vllm-project/vllm#28788; ``vllm/utils/import_utils.py`` ``has_triton_kernels`` 0.12.0), so that
``get_mxfp4_backend`` picks ``TRITON`` on Hopper by default ("Using Triton backend" in the 0.14.1 log of
vllm-project/vllm#33155; "Using 'TRITON' Mxfp4 MoE backend" from 0.19). 0.10.1-0.11.2 images and wheels have no
``triton_kernels`` and run Marlin."""


def mxfp4_moe_backend(compute_capability: tuple[int, int] | None, engine_version: str | None = None) -> str | None:
    """The MXFP4 MoE kernel vLLM picks on a GPU of ``compute_capability`` (None: unknown → None) in release
    ``engine_version`` (None: not stated → the Marlin reading, the larger weights).

    vLLM ``quantization/mxfp4.py`` ``get_mxfp4_backend`` (0.11–0.12, no LoRA, the official image: FlashInfer
    installed, ``VLLM_USE_FLASHINFER_MOE_MXFP4_*`` unset):

    * SM100 family (B200/GB200, ``is_device_capability_family(100)``) with FlashInfer → ``flashinfer`` (the
      ``SM100_FI_MXFP4_BF16`` backend);
    * SM90 (Hopper) before :data:`MXFP4_TRITON_ON_HOPPER_SINCE` → ``marlin``: the FlashInfer SM90 path needs
      ``VLLM_USE_FLASHINFER_MOE_MXFP4_BF16``, and the Triton path needs OpenAI's ``triton_kernels`` package, which
      0.10.1-0.11.2 do not ship (gpt-oss-120b on H100 loads 65.97 GiB with "Using Marlin backend");
    * Ampere/Ada (8.x) and SM120 (RTX 50xx, RTX PRO 6000) → ``marlin``: Triton kernels are gated to
      ``(9, 0) <= capability < (11, 0)`` and FlashInfer's MXFP4 MoE to SM90/SM100;
    * SM90 from :data:`MXFP4_TRITON_ON_HOPPER_SINCE` → ``triton`` (no padding of the weights;
      :func:`advisor.capacity.weights.mxfp4_padding_bytes_per_gpu` counts what its layout keeps by release).
    """
    if compute_capability is None:
        return None
    major = compute_capability[0]
    if major == 9:
        parsed = parse_version(engine_version)
        if parsed is not None and parsed >= MXFP4_TRITON_ON_HOPPER_SINCE:
            return "triton"
    return "flashinfer" if major == 10 else "marlin"


_MXFP4_PAD: Final[dict[str, tuple[int, int]]] = {
    # backend: (hidden multiple, intermediate-per-partition multiple), mxfp4.py Mxfp4MoEMethod.create_weights
    "marlin": (256, 128),  # "moe marlin kernel requires ... n % 256 == 0 and k % 128 == 0"
    "flashinfer": (256, 256),  # SM100_FI_MXFP4_BF16 / _MXFP8_TRTLLM: round_up(…, 256) both
}


def mxfp4_padded_expert_shape(
    hidden: int,
    intermediate_per_partition: int,
    compute_capability: tuple[int, int] | None,
    engine_version: str | None = None,
) -> tuple[int, int]:
    """(hidden, intermediate per TP partition) of the MXFP4 expert tensors vLLM allocates on a GPU of
    ``compute_capability``: ``w13`` is ``2 × I_pad × H_pad`` and ``w2`` ``H_pad × I_pad`` elements (plus their
    E8M0 scales, one per 32), ``Mxfp4MoEMethod.create_weights`` in ``quantization/mxfp4.py`` rounding each up to
    the backend's multiple (:func:`mxfp4_moe_backend`). gpt-oss-120b (hidden 2880, intermediate 2880) on Hopper's
    Marlin kernel: 3072 and 2944 at TP 1; an unknown capability (None) pads nothing.
    """
    backend = mxfp4_moe_backend(compute_capability, engine_version)
    if backend is None or backend not in _MXFP4_PAD:  # Triton pads no weight (its layout: weights.py)
        return hidden, intermediate_per_partition
    h_mult, i_mult = _MXFP4_PAD[backend]
    return _round_up(hidden, h_mult), _round_up(intermediate_per_partition, i_mult)


_KV_BYTES: Final[dict[str, int]] = {
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
}


def model_dtype_name(model_dtype: str) -> str | None:
    """The :data:`DTYPE_BYTES` name of a checkpoint's ``torch_dtype`` (case, spaces and a ``torch.`` prefix
    ignored: ``"torch.bfloat16"`` → ``bfloat16``), None for a dtype vLLM does not load."""
    name = model_dtype.strip().lower().removeprefix("torch.")
    return name if name in DTYPE_BYTES else None


def resolve_dtype(dtype: str, model_dtype: str) -> str:
    """The compute dtype vLLM serves with for ``--dtype`` ``dtype`` and a checkpoint of ``model_dtype``.

    ``auto`` → the checkpoint dtype, except float32 → ``bfloat16`` (vLLM ``_get_and_verify_dtype``).
    ``half`` → ``float16``; ``float`` → ``float32``.

    Raises:
        CapacityError: an unknown dtype name (the message lists the known ones).
    """
    name = dtype.strip().lower()
    if name == "auto":
        model = model_dtype_name(model_dtype)
        if model is None:
            raise CapacityError(f"unknown model dtype {model_dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
        return "bfloat16" if DTYPE_BYTES[model] == 4 else ("float16" if model == "half" else model)
    if name not in DTYPE_BYTES:
        raise CapacityError(f"unknown dtype {dtype!r}; known: auto, {', '.join(sorted(DTYPE_BYTES))}")
    return {"half": "float16", "float": "float32"}.get(name, name)


CHECKPOINT_ONLY_METHODS: Final = frozenset({"compressed-tensors", "modelopt_mixed"})
"""``--quantization`` names that only load a checkpoint stored that way (vLLM builds their config from the
checkpoint's ``quantization_config``; there is no width to serve an unquantized checkpoint at)."""


def weight_bytes_per_param(dtype: str, quantization: str | None, model_dtype: str | None = None) -> float:
    """Bytes per *linear-layer* weight parameter.

    Args:
        dtype: ``bfloat16``, ``float16``, ``float32`` or ``auto`` (``auto`` needs ``model_dtype``, the
            checkpoint's ``torch_dtype``, and resolves as :func:`resolve_dtype`).
        quantization: ``None`` (unquantized: the dtype's width), ``fp8`` (1 + 4/16384 bytes) or ``int8`` (1),
            ``awq`` or ``gptq`` (int4, group 128: 4.15625 bits = 0.51953 bytes), ``mxfp4`` (4.25 bits),
            ``nvfp4`` (4.5 bits), ``bitsandbytes`` (4-bit in flight, 4.5 bits); see the module docstring.
        model_dtype: the checkpoint dtype, used only when ``dtype`` is ``auto``.

    Returns:
        bytes per parameter, e.g. 2.0 for bfloat16, 1.000244 for fp8, 0.51953 for AWQ.

    Raises:
        CapacityError: unknown dtype or quantization, or ``auto`` without ``model_dtype``.
    """
    if quantization is not None:
        q = quantization.strip().lower()
        if q == "gguf":
            raise CapacityError(
                "quantization 'gguf' is sized from the file's type: give it (plan --gguf-file-type, config "
                "gguf_file_type: Q4_K_M, Q8_0 …, as llama-quantize names it)"
            )
        if q in CHECKPOINT_ONLY_METHODS:
            raise CapacityError(
                f"quantization {quantization!r} names a checkpoint's format (its config.json quantization_config), "
                "not a precision to serve an unquantized checkpoint in: give the quantized checkpoint's config.json "
                f"(plan --model PATH), or a precision ({', '.join(sorted(_QUANT_BYTES))})"
            )
        if q not in _QUANT_BYTES:
            raise UnknownNameError(f"unknown quantization {quantization!r}; known: {', '.join(sorted(_QUANT_BYTES))}")
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
        raise UnknownNameError(
            f"unknown kv_cache_dtype {kv_cache_dtype!r}; known: auto, {', '.join(sorted(_KV_BYTES))}"
        )
    return _KV_BYTES[name]
