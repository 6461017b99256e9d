"""GGUF weights: the tensor type llama.cpp's quantizer gives each weight of a file type, and the bytes they take.

A GGUF file's ``general.file_type`` (``Q4_K_M`` …) names a *mix*, not one width: ``llama-quantize`` picks each
tensor's ggml type from the file type, the tensor's role, its layer and the model's shape. llama.cpp
``src/llama-quant.cpp`` (``llama_ftype_get_default_type``, ``llama_tensor_get_type_impl``,
``tensor_type_fallback``, ``tensor_allows_quantization``) is followed here for the file types of
:data:`FILE_TYPE_DEFAULT` (the legacy and k-quant mixes; the IQ/TQ mixes need an importance matrix and are not
sized):

* the output (LM head) tensor, and the token embedding too when the model has no ``output.weight`` (tied
  embeddings): ``Q8_0`` when its row (hidden) is not a multiple of the default type's block, else ``Q6_K`` unless
  the default is ``Q8_0`` (then the row fallback below, as for every tensor);
* ``attn_v``: ``Q2_K`` → ``Q4_K`` (GQA ≥ 4) or ``Q3_K``; ``Q3_K_M`` → ``Q5_K`` for the first two, ``Q4_K`` after;
  ``Q3_K_L`` → ``Q5_K``; ``Q4_K_M``/``Q5_K_M`` → ``Q6_K`` where ``use_more_bits``; ``Q4_K_S`` → ``Q5_K`` for the first
  four; then a 70B llama/qwen2 (80 layers) takes ``Q5_K`` over ``Q3_K``/``Q4_K``, and an 8-expert model ``Q8_0``;
* ``attn_k``: ``Q8_0`` on an 8-expert model;
* ``attn_output``: 8 experts: ``Q5_K`` for ``Q2_K``, ``Q3_K_S``, ``Q3_K_M``, ``Q4_K_S``, ``Q4_K_M``; else ``Q2_K`` →
  ``Q3_K``, ``Q3_K_M`` → ``Q4_K``, ``Q3_K_L`` → ``Q5_K``;
* ``ffn_down``: ``Q2_K`` → ``Q3_K``; ``Q3_K_M`` → ``Q5_K`` in the first sixteenth of layers, else ``Q4_K``;
  ``Q3_K_L`` → ``Q5_K``; ``Q4_K_M``/``Q5_K_M`` → ``Q6_K`` where ``use_more_bits``; ``Q4_K_S`` → ``Q5_K`` in the first
  eighth;
* every other weight matrix: the file type's default type;
* ``use_more_bits(i, n)``: ``i < n/8 or i >= 7n/8 or (i − n/8) % 3 == 2`` (integer division), over the position
  among that tensor's kind (the layer index on MoE models);
* a row (``ne[0]``, the input width) the chosen type's block does not divide falls back: ``Q4_K`` → ``Q5_0``,
  ``Q5_K`` → ``Q5_1``, ``Q6_K`` → ``Q8_0``, ``Q2_K``/``Q3_K`` → ``Q4_0``, and to ``F16`` if that block does not
  divide it either;
* norms, biases and MoE routers (1-D, or ``ffn_gate_inp``) are not quantized.

Bytes per block of each type: ggml ``ggml.c`` ``type_traits`` (``blck_size``, ``type_size``) and the block
structs of ``ggml-common.h``: ``Q4_0`` 18 B / 32, ``Q8_0`` 34 B / 32, ``Q4_K`` 144 B / 256, ``Q6_K`` 210 B / 256 ….

The counts are order-free: which tensors of a kind take the wider type depends on the quantizer's walk, but how
many does not, and the tensors of one kind share a shape. So the sum is the file's tensor bytes.
Meta-Llama-3.3-70B-Instruct ``Q4_K_M``: 42,512,345,088 B ≈ 42.52 GB, the size the published Q4_K_M files of that
model list; vLLM 0.6.4 logs "Loading model weights took 39.6686 GB" (42.59 GB: the tensors plus the rotary cache).

Files quantized before llama.cpp gave merged MoE experts' ``ffn_down`` the ``use_more_bits`` widths are smaller (a
Mixtral-8x7B Q4_K_M of December 2023 is 26.4 GB, this rule's 28.4 GB): the rule is the current quantizer's.

How each engine holds them: llama.cpp maps the file's tensors as they are (the input embedding in host memory:
:func:`advisor.capacity.weights.llamacpp_weights_bytes_per_gpu`); vLLM (``--quantization gguf``,
``model_executor/layers/quantization/gguf.py``) keeps every quantized matrix as its raw blocks (``GGUFLinearMethod``,
``GGUFEmbeddingMethod``, ``GGUFMoEMethod``) and the unquantized ones in the compute dtype.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from advisor.capacity.mixedprecision import WeightGroup
from advisor.capacity.models import ModelArch
from advisor.errors import CapacityError

__all__ = [
    "FILE_TYPE_DEFAULT",
    "GGML_TYPE_BLOCK",
    "GGUF_QUANTIZATION",
    "as_served",
    "file_type_name",
    "gguf_tensor_types",
    "gguf_weight_bytes",
    "with_gguf_file_type",
]

GGUF_QUANTIZATION: Final = "gguf"
"""vLLM's ``--quantization`` name for a GGUF checkpoint."""

GGML_TYPE_BLOCK: Final[dict[str, tuple[int, int]]] = {
    "F32": (1, 4),
    "F16": (1, 2),
    "BF16": (1, 2),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q8_0": (32, 34),
    "Q2_K": (256, 84),
    "Q3_K": (256, 110),
    "Q4_K": (256, 144),
    "Q5_K": (256, 176),
    "Q6_K": (256, 210),
}
"""ggml type → (elements per block, bytes per block): ggml ``ggml.c`` ``type_traits`` and ``ggml-common.h``
(``block_q4_K``: two fp16 scales, 12 bytes of 6-bit sub-block scales and mins, 128 bytes of nibbles = 144)."""

FILE_TYPE_DEFAULT: Final[dict[str, str]] = {
    "F16": "F16",
    "BF16": "BF16",
    "Q8_0": "Q8_0",
    "Q4_0": "Q4_0",
    "Q4_1": "Q4_1",
    "Q5_0": "Q5_0",
    "Q5_1": "Q5_1",
    "Q2_K": "Q2_K",
    "Q3_K_S": "Q3_K",
    "Q3_K_M": "Q3_K",
    "Q3_K_L": "Q3_K",
    "Q4_K_S": "Q4_K",
    "Q4_K_M": "Q4_K",
    "Q5_K_S": "Q5_K",
    "Q5_K_M": "Q5_K",
    "Q6_K": "Q6_K",
}
"""File type (``llama-quantize``'s name, ``general.file_type``) → the default tensor type
(``llama_ftype_get_default_type``)."""

_FALLBACK: Final[dict[str, str]] = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
"""``tensor_type_fallback``: a k-quant whose 256-element block does not divide the row → a 32-block type."""

SUPPORTED_MODEL_TYPES: Final = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma", "gemma2", "gemma3_text"}
)
"""``model_type`` values whose GGUF conversion keeps separate ``attn_q``/``attn_k``/``attn_v`` and
``ffn_gate``/``ffn_up``/``ffn_down`` tensors of the checkpoint's shapes (llama.cpp ``convert_hf_to_gguf.py``): the
tensors this module enumerates."""

SEVENTY_B_TYPES: Final = frozenset({"llama", "mistral", "qwen2"})
"""Architectures whose 80-layer models llama.cpp types ``LLM_TYPE_70B`` (``src/llama-model.cpp`` ``load_hparams``:
llama ``case 80`` when the query heads outnumber the KV heads, qwen2 ``case 80``), which widens ``attn_v``."""


def _use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp ``use_more_bits``: the first and last eighth of the layers and every third in between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _fallback(kind: str, row: int) -> str:
    """The type a ``row``-wide tensor actually takes for ``kind`` (``tensor_type_fallback``)."""
    block = GGML_TYPE_BLOCK[kind][0]
    if row % block == 0:
        return kind
    other = _FALLBACK.get(kind, "F16")
    return other if row % GGML_TYPE_BLOCK[other][0] == 0 else "F16"


def _bytes(kind: str, parameters: int) -> float:
    block, size = GGML_TYPE_BLOCK[kind]
    return parameters * size / block


def gguf_tensor_types(model: ModelArch, file_type: str) -> list[tuple[str, str, int]]:
    """The weight matrices of ``model`` in a ``file_type`` GGUF file, grouped by role and ggml type.

    Args:
        model: a dense or MoE transformer of :data:`SUPPORTED_MODEL_TYPES` (no MLA, no recurrent layers, no vision
            tower: a GGUF file holds the language model; the projector is a separate ``mmproj`` file).
        file_type: ``Q4_K_M`` … (:data:`FILE_TYPE_DEFAULT`, case-insensitive).

    Returns:
        ``[(role, ggml type, parameters)]``; roles ``embedding``, ``lm_head``, ``attention``, ``dense_mlp``,
        ``experts``, ``shared_experts``. Norms, biases and routers are not listed (not quantized).

    Raises:
        CapacityError: an unknown or unsized file type, or a model this enumeration does not cover (the message
            names the model and why).
    """
    ft = file_type_name(file_type)
    _check_model(model)
    default = FILE_TYPE_DEFAULT[ft]
    quantized = default not in ("F16", "BF16", "F32")
    h, n = model.hidden_size, model.num_layers
    q_width = model.num_attention_heads * model.head_dim
    kv_width = model.num_kv_heads * model.head_dim
    gqa = model.num_attention_heads // max(1, model.num_kv_heads)
    experts = model.num_experts if model.is_moe else 0
    seventy_b = model.model_type in SEVENTY_B_TYPES and n == 80 and (model.model_type == "qwen2" or gqa > 1)
    out: list[tuple[str, str, int]] = []

    def add(role: str, kind: str, row: int, parameters: int) -> None:
        out.append((role, _fallback(kind, row) if quantized else kind, parameters))

    def output_type() -> str:
        if not quantized:
            return default
        if h % GGML_TYPE_BLOCK[default][0]:
            return "Q8_0"
        return default if default == "Q8_0" else "Q6_K"

    vocab_rows = model.vocab_size * h
    if model.tie_word_embeddings:
        add("embedding", output_type(), h, vocab_rows)
    else:
        add("embedding", default, h, vocab_rows)
        add("lm_head", output_type(), h, vocab_rows)
    for i in range(n):
        v = default
        if quantized:
            if ft == "Q2_K":
                v = "Q4_K" if gqa >= 4 else "Q3_K"
            elif ft == "Q3_K_M":
                v = "Q5_K" if i < 2 else "Q4_K"
            elif ft == "Q3_K_L":
                v = "Q5_K"
            elif ft in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, n):
                v = "Q6_K"
            elif ft == "Q4_K_S" and i < 4:
                v = "Q5_K"
            if seventy_b and v in ("Q3_K", "Q4_K"):
                v = "Q5_K"
            if experts == 8:
                v = "Q8_0"
        k = "Q8_0" if quantized and experts == 8 else default
        o = default
        if quantized and experts == 8:
            o = "Q5_K" if ft in ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M") else default
        elif quantized:
            o = {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K"}.get(ft, default)
        add("attention", default, h, h * q_width)
        add("attention", k, h, h * kv_width)
        add("attention", v, h, h * kv_width)
        add("attention", o, q_width, q_width * h)
        down = default
        if quantized:
            if ft == "Q2_K":
                down = "Q3_K"
            elif ft == "Q3_K_M":
                down = "Q5_K" if i < n // 16 else "Q4_K"
            elif ft == "Q3_K_L":
                down = "Q5_K"
            elif ft in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, n):
                down = "Q6_K"
            elif ft == "Q4_K_S" and i < n // 8:
                down = "Q5_K"
        moe_layer = experts > 0 and i >= n - model.moe_layers
        if moe_layer:
            width = model.moe_intermediate_size
            add("experts", default, h, 2 * experts * h * width)
            add("experts", down, width, experts * width * h)
            if model.num_shared_experts:
                shared = model.num_shared_experts * width
                add("shared_experts", default, h, 2 * h * shared)
                add("shared_experts", down, shared, shared * h)
        else:
            width = model.intermediate_size
            add("dense_mlp", default, h, 2 * h * width)
            add("dense_mlp", down, width, width * h)
    merged: dict[tuple[str, str], int] = {}
    for role, kind, parameters in out:
        merged[(role, kind)] = merged.get((role, kind), 0) + parameters
    return [(role, kind, parameters) for (role, kind), parameters in merged.items()]


def gguf_weight_bytes(model: ModelArch, file_type: str) -> int:
    """Bytes of ``model``'s weight matrices in a ``file_type`` GGUF file (:func:`gguf_tensor_types`; norms, biases
    and routers excluded). Raises :class:`CapacityError` as that function does."""
    return round(sum(_bytes(kind, p) for _, kind, p in gguf_tensor_types(model, file_type)))


def with_gguf_file_type(model: ModelArch, file_type: str) -> ModelArch:
    """``model`` as a ``file_type`` GGUF checkpoint: its method ``gguf`` and its weight matrices as
    :class:`~advisor.capacity.mixedprecision.WeightGroup` s by ggml type, which the weights pass sums
    (:func:`advisor.capacity.weights.weights_bytes_total`); what no group holds (norms, biases, routers) stays in
    the compute dtype, counted from the shapes (:meth:`ModelArch.computed_parameters`). Raises
    :class:`CapacityError` as :func:`gguf_tensor_types` does."""
    groups = tuple(
        WeightGroup(role, parameters, GGML_TYPE_BLOCK[kind][1] / GGML_TYPE_BLOCK[kind][0])
        for role, kind, parameters in gguf_tensor_types(model, file_type)
    )
    return dataclasses.replace(
        model,
        # the file holds the architecture's tensors: what no group holds (norms, biases, routers) is the computed
        # count less the groups, not a published total (rounded for some presets) less them
        num_parameters=model.computed_parameters(),
        checkpoint_quantization=GGUF_QUANTIZATION,
        checkpoint_weight_groups=groups,
        checkpoint_weight_bits=None,
        checkpoint_group_size=None,
    )


def as_served(
    model: ModelArch, file_type: str | None, quantization: str | None, *, names: tuple[str, str]
) -> tuple[ModelArch, str | None]:
    """``model`` and the stated ``quantization`` as a GGUF file of ``file_type`` serves them: the model through
    :func:`with_gguf_file_type` and the method spelled ``gguf`` however it was stated (``GGUF``, `` gguf``); both
    unchanged without a file type. ``names`` are the input's names for the file type and the method
    (``("--gguf-file-type", "--quantization")`` for ``plan``, the config keys for a deployment), for the messages.

    Raises:
        CapacityError: the method ``gguf`` without a file type (a GGUF file's weights are a per-tensor mix its type
            names), a file type with another method, or a type or model this module does not size; each names the
            input.
    """
    type_name, method_name = names
    method = (quantization or "").strip().lower()
    if file_type is None:
        if method == GGUF_QUANTIZATION:
            raise CapacityError(
                f"{method_name} gguf needs {type_name}: the file's type as llama-quantize names it (Q4_K_M, Q8_0 …; "
                "llama.cpp prints it as 'file type' at load), which sets each tensor's width"
            )
        return model, quantization
    if method not in ("", GGUF_QUANTIZATION):
        raise CapacityError(f"{type_name} {file_type} is a GGUF file's; {method_name} {quantization} is not")
    try:
        return with_gguf_file_type(model, file_type), (GGUF_QUANTIZATION if method else None)
    except CapacityError as exc:
        raise CapacityError(f"{type_name}: {exc}") from None


def file_type_name(file_type: str) -> str:
    """``file_type`` as :data:`FILE_TYPE_DEFAULT` names it (case-insensitive; llama.cpp's ``MOSTLY_`` prefix
    dropped). Raises :class:`CapacityError` naming the known types when it is not one."""
    ft = file_type.strip().upper()
    if ft.startswith("MOSTLY_"):
        ft = ft.removeprefix("MOSTLY_")
    if ft not in FILE_TYPE_DEFAULT:
        raise CapacityError(
            f"GGUF file type {file_type!r} is not sized; known: {', '.join(FILE_TYPE_DEFAULT)} (the IQ and TQ "
            "mixes need llama-quantize's importance matrix and are not sized)"
        )
    return ft


def _check_model(model: ModelArch) -> None:
    why = ""
    if model.model_type not in SUPPORTED_MODEL_TYPES:
        why = f"model_type {model.model_type or '(unknown)'!r} is not one of {', '.join(sorted(SUPPORTED_MODEL_TYPES))}"
    elif model.is_mla or model.linear_layers:
        why = "MLA and recurrent layers are converted to other tensors"
    elif model.vision_parameters:
        why = "its vision tower is a separate mmproj file; plan the language model (--language-model-only)"
    elif model.has_layer_kinds or model.per_layer_input_size or model.attention_output_gate:
        why = "its layers differ in shape"
    if why:
        raise CapacityError(f"{model.name}: GGUF weights not sized: {why}")
