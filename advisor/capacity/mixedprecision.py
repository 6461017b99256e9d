"""Mixed-precision checkpoints: which linear layers vLLM stores in which format, and the bytes each takes.

Two ``quantization_config`` layouts name a format per layer rather than one for the whole model:

* ModelOpt ``quant_algo: MIXED_PRECISION`` (e.g. nvidia/Qwen3.6-35B-A3B-NVFP4: FP8 attention and Gated-DeltaNet
  projections, W4A16 NVFP4 experts, shared experts and LM head). vLLM 0.24.0
  ``model_executor/layers/quantization/modelopt.py`` ``ModelOptMixedPrecisionConfig.get_quant_method`` looks each
  layer's prefix up in ``quantized_layers`` (``_resolve_quant_algo``: the exact name, the shards of a fused layer
  through ``packed_modules_mapping``, then any key under the prefix, so ``…mlp.experts`` covers the routed
  experts) and gives ``FP8`` → ``ModelOptFp8LinearMethod`` / ``ModelOptFp8MoEMethod``, ``NVFP4`` or
  ``W4A16_NVFP4`` → the NVFP4 linear / ``ModelOptNvFp4FusedMoE`` methods, and any other layer (not listed, or an
  algorithm other than those three) ``UnquantizedLinearMethod``: the compute dtype. Embeddings, norms and the
  vision tower are never looked up there (not ``LinearBase``/``ParallelLMHead``/``RoutedExperts``).
* compressed-tensors with several ``config_groups`` (e.g. FP8 block attention + W4A16 group-32 experts). vLLM 0.14
  ``compressed_tensors/compressed_tensors.py`` ``get_scheme`` and ``utils.py`` ``find_matched_target``: a layer is
  skipped when ``should_ignore_layer`` matches it against ``ignore`` (exact name or ``re:`` regex); otherwise the
  first target of the groups in order that equals or ``re.match``-es its name, else the first one contained in its
  class name (``Linear`` for every ``LinearBase``; the fused MoE takes the ``Linear`` scheme,
  ``_add_fused_moe_to_target_scheme_map``, and is looked up by ``<experts prefix>.0.gate_proj`` etc.,
  ``CompressedTensorsMoEMethod.get_moe_method``). The LM head is not a ``LinearBase``: never quantized there.

Bytes per weight of each format (the tensors each method's ``create_weights`` allocates):

* FP8 (ModelOpt ``FP8``, compressed-tensors float 8-bit per-tensor/channel): one ``float8_e4m3fn`` byte, the
  per-tensor/per-channel fp32 scales under 0.1 % and left out; block-quantized: one fp32 scale per block,
  ``1 + 4 / (bh × bw)`` (``[128, 128]``: :data:`~advisor.capacity.precision.FP8_BLOCK_BYTES`).
* NVFP4 (``NVFP4``, ``W4A16_NVFP4``; compressed-tensors float 4-bit): packed E2M1 nibbles (``uint8`` of ``in/2``)
  plus one ``float8_e4m3fn`` scale per ``group_size`` (16) inputs: ``(4 + 8 / group) / 8`` = 0.5625 bytes
  (``ModelOptNvFp4W4A16LinearMethod.create_weights``, ``ModelOptNvFp4FusedMoE.create_weights``).
* integer W``b``A16 with groups (compressed-tensors ``pack-quantized``): ``b`` bits packed in int32 plus one
  compute-dtype (16-bit) scale per ``group_size`` inputs (``CompressedTensorsWNA16MarlinMoEMethod.create_weights``
  ``w13_weight_scale`` … ``dtype=params_dtype``), and a ``b``-bit packed zero point per group when
  ``symmetric`` is false on a linear layer (``CompressedTensorsWNA16.create_weights`` ``weight_zero_point``; the
  MoE method holds none): ``b + 16 / g (+ b / g)`` bits. Per-channel: ``b`` bits.

Layer groups and their parameters per layer (:class:`LayerShapes`, filled by :mod:`advisor.capacity.models`):
``attention`` (q/k/v/o), ``recurrent`` (Gated-DeltaNet ``in_proj_qkvz`` + ``out_proj``), ``recurrent_gates``
(``in_proj_ba``), ``experts`` (all routed experts of a layer), ``shared_experts``, ``router``, ``dense_mlp`` and the
``lm_head``. What no group covers (embeddings, norms, conv and decay vectors, the vision tower) stays in the compute
dtype.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from advisor.errors import CapacityError

__all__ = ["TABLE_GROUPS", "LayerShapes", "WeightGroup", "is_mixed_precision", "mixed_weight_groups", "per_layer_width"]

TABLE_GROUPS: Final = frozenset({"embedding", "lm_head"})
"""Groups that are the vocabulary tables, not decoder layers: a pipeline stage holds them whole or not at all, and the
mean width of a decoder layer's linear weights leaves them out."""


@dataclass(frozen=True)
class WeightGroup:
    """Parameters of one layer group stored in one format.

    Attributes:
        name: the layer group (``attention``, ``experts``, ``lm_head`` …).
        parameters: parameters of the group over the whole model, in this format.
        bytes_per_parameter: bytes each takes on the GPU, scales included; None: the compute dtype (unquantized).
    """

    name: str
    parameters: int
    bytes_per_parameter: float | None


@dataclass(frozen=True)
class LayerShapes:
    """Per-layer parameters of each layer group and how many decoder layers have it.

    Attributes:
        groups: group name → (parameters in one layer, layers that have the group); ``lm_head`` has layers 1.
        moe_prefix: the module holding the experts in vLLM's names (``mlp``; ``block_sparse_moe`` for Mixtral and
            MiniMax-M2), for compressed-tensors targets written against those names.
    """

    groups: Mapping[str, tuple[int, int]]
    moe_prefix: str = "mlp"


_GROUP_OF_MODULE: Final = (
    # (regex on the part after "layers.<i>.", group)
    (re.compile(r"(self_attn|attention)\.(q|k|v|o|qkv|q_a|q_b|kv_a|kv_b)(_proj)?(_with_mqa)?$"), "attention"),
    (re.compile(r"linear_attn\.(in_proj_qkvz|in_proj_qkv|in_proj_z|out_proj)$"), "recurrent"),
    (re.compile(r"linear_attn\.(in_proj_ba|in_proj_b|in_proj_a)$"), "recurrent_gates"),
    (re.compile(r"(mlp|block_sparse_moe|feed_forward)\.experts(\..*)?$"), "experts"),
    (re.compile(r"(mlp|feed_forward)\.shared_experts?\.(gate|up|down|gate_up)_proj$"), "shared_experts"),
    (re.compile(r"(mlp|block_sparse_moe|feed_forward)\.(gate|router)$"), "router"),
    (re.compile(r"(mlp|feed_forward)\.(gate|up|down|gate_up)_proj$"), "dense_mlp"),
)
"""A ``quantized_layers`` key's module (after ``layers.<i>.``) → its layer group; keys matching none (a
``shared_expert_gate``, the vision tower's) are not sized and stay in the compute dtype with the rest."""

_LAYER_KEY: Final = re.compile(r"^(?P<stem>.*?)layers\.(?P<index>\d+)\.(?P<module>.+)$")


def is_mixed_precision(qc: Mapping[str, Any]) -> bool:
    """Whether ``quantization_config`` names a format per layer: ModelOpt ``quant_algo`` ``MIXED_PRECISION``, or
    compressed-tensors ``config_groups`` whose ``weights`` differ between groups."""
    method = str(qc.get("quant_method") or "").strip().lower()
    if method.startswith("modelopt"):
        return str(_modelopt_algo(qc)).upper() == "MIXED_PRECISION"
    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        if not isinstance(groups, Mapping):
            return False
        weights = {repr(g.get("weights")) for g in groups.values() if isinstance(g, Mapping)}
        return len(weights) > 1
    return False


def per_layer_width(qc: Mapping[str, Any]) -> bool:
    """Whether the checkpoint's weight width is read per layer group (:func:`mixed_weight_groups`) rather than from
    its method's usual width: a :func:`is_mixed_precision` checkpoint, or compressed-tensors whose ``config_groups``
    store anything but 8-bit floats — integer ``pack-quantized`` W4A16/W8A16 or float 4-bit groups, which one method
    name (``compressed-tensors``) covers at 0.5–1 byte a weight (vLLM ``compressed_tensors.py`` ``get_scheme`` picks
    the kernel from ``weights.num_bits``/``type``). A compressed-tensors checkpoint of FP8 groups only (or with no
    ``config_groups``) is read as ``fp8``."""
    if is_mixed_precision(qc):
        return True
    if str(qc.get("quant_method") or "").strip().lower() != "compressed-tensors":
        return False
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping):
        return False
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if isinstance(weights, Mapping) and not (
            str(weights.get("type") or "int").lower() == "float" and weights.get("num_bits") == 8
        ):
            return True
    return False


def _modelopt_algo(qc: Mapping[str, Any]) -> Any:
    """``quant_algo`` of a ModelOpt config, at the top (config.json) or under ``quantization`` (the legacy
    ``hf_quant_config.json`` layout), as ``ModelOptQuantConfigBase._extract_modelopt_quant_algo`` reads it."""
    inner = qc.get("quantization")
    return inner.get("quant_algo") if isinstance(inner, Mapping) else qc.get("quant_algo")


def mixed_weight_groups(qc: Mapping[str, Any], shapes: LayerShapes, name: str) -> tuple[WeightGroup, ...]:
    """The model's linear layers by group and format, for a checkpoint :func:`per_layer_width` accepts.

    Every layer of a group is counted once: in the format its entry names, else (not listed, ignored, or a format
    vLLM's mixed loader does not apply) in the compute dtype (``bytes_per_parameter`` None).

    Raises:
        CapacityError: a group's modules in one layer name different formats, or a format whose bytes are not
            known here; the message names the layer and the key.
    """
    method = str(qc.get("quant_method") or "").strip().lower()
    per_layer: dict[tuple[str, int], set[float | None]] = {}
    if method.startswith("modelopt"):
        _modelopt_layers(qc, shapes, name, per_layer)
    else:
        _compressed_tensors_layers(qc, shapes, name, per_layer)
    out: list[WeightGroup] = []
    for group, (params, layers) in shapes.groups.items():
        if params <= 0 or layers <= 0:
            continue
        listed = {index: formats for (g, index), formats in per_layer.items() if g == group}
        if len(listed) > layers:
            raise CapacityError(
                f"{name}: quantization_config lists {group} modules in {len(listed)} layers, the model has {layers}"
            )
        counts: dict[float | None, int] = {None: layers - len(listed)}
        for index, formats in sorted(listed.items()):
            if len(formats) > 1:
                raise CapacityError(
                    f"{name}: quantization_config gives the {group} modules of layer {index} different formats "
                    f"({', '.join(sorted(str(f) for f in formats))} bytes per weight); not sized"
                )
            fmt = next(iter(formats))
            counts[fmt] = counts.get(fmt, 0) + 1
        out += [WeightGroup(group, params * n, fmt) for fmt, n in counts.items() if n]
    return tuple(out)


def _modelopt_layers(
    qc: Mapping[str, Any], shapes: LayerShapes, name: str, per_layer: dict[tuple[str, int], set[float | None]]
) -> None:
    """``per_layer[(group, layer)]`` from ModelOpt's ``quantized_layers`` (top level, or under ``quantization``).
    Keys of the multi-token-prediction layers (``mtp.…``: loaded only as a speculative draft) are skipped, as the
    main model's loader skips them (``Qwen3_5ForConditionalGeneration.load_weights`` ``skip_prefixes=["mtp."]``)."""
    inner = qc.get("quantization")
    layers = (inner if isinstance(inner, Mapping) else qc).get("quantized_layers")
    if not isinstance(layers, Mapping) or not layers:
        raise CapacityError(
            f"{name}: quantization_config has quant_algo MIXED_PRECISION but no quantized_layers (vLLM's "
            'ModelOptMixedPrecisionConfig refuses it: "MIXED_PRECISION quant_algo requires a non-empty '
            "'quantized_layers' mapping\")"
        )
    for key, entry in layers.items():
        if not isinstance(entry, Mapping) or str(key).split(".")[0] == "mtp":
            continue
        fmt = _modelopt_bytes(entry, name, str(key))
        if key == "lm_head" or str(key).endswith(".lm_head"):
            per_layer.setdefault(("lm_head", 0), set()).add(fmt)
            continue
        found = _LAYER_KEY.match(str(key))
        if found is None or "mtp" in found["stem"]:
            continue
        group = next((g for pattern, g in _GROUP_OF_MODULE if pattern.search(found["module"])), None)
        if group is not None:
            per_layer.setdefault((group, int(found["index"])), set()).add(fmt)


def _modelopt_bytes(entry: Mapping[str, Any], name: str, key: str) -> float | None:
    """Bytes per weight of one ``quantized_layers`` entry: ``FP8`` 1, ``NVFP4`` / ``W4A16_NVFP4`` ``(4 + 8 /
    group_size) / 8`` (``group_size`` default 16, as ``ModelOptMixedPrecisionConfig._from_config``); any other
    algorithm None: ``get_quant_method`` (vLLM 0.24.0) gives it ``UnquantizedLinearMethod``."""
    algo = str(entry.get("quant_algo") or "").upper()
    if algo == "FP8":
        return 1.0
    if algo in ("NVFP4", "W4A16_NVFP4"):
        group = entry.get("group_size", 16)
        if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
            raise CapacityError(f"{name}: quantized_layers[{key!r}].group_size must be a positive integer: {group!r}")
        return (4 + 8 / group) / 8
    return None


def _compressed_tensors_layers(
    qc: Mapping[str, Any], shapes: LayerShapes, name: str, per_layer: dict[tuple[str, int], set[float | None]]
) -> None:
    """``per_layer[(group, layer)]`` from compressed-tensors ``config_groups`` and ``ignore``, each group's
    modules named as vLLM names them (see the module docstring for the matching order)."""
    targets: list[tuple[str, Mapping[str, Any]]] = []
    for group in (qc.get("config_groups") or {}).values():
        if isinstance(group, Mapping) and isinstance(group.get("weights"), Mapping):
            targets += [(str(t), group["weights"]) for t in group.get("targets") or []]
    ignore = [str(t) for t in qc.get("ignore") or []]
    moe = shapes.moe_prefix
    modules = {
        "attention": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"),
        "recurrent": ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.out_proj"),
        "recurrent_gates": ("linear_attn.in_proj_b", "linear_attn.in_proj_a"),
        "experts": tuple(f"{moe}.experts.0.{p}" for p in ("gate_proj", "up_proj", "down_proj")),
        "shared_experts": tuple(f"mlp.shared_expert.{p}" for p in ("gate_proj", "up_proj", "down_proj")),
        "router": (f"{moe}.gate",),
        "dense_mlp": ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"),
    }
    for group, (_, layers) in shapes.groups.items():
        for index in range(layers if group in modules else 0):
            for module in modules[group]:
                layer_name = f"model.layers.{index}.{module}"
                if any(_matches(layer_name, t) for t in ignore):
                    fmt: float | None = None
                else:
                    weights = next((w for t, w in targets if _matches(layer_name, t)), None)
                    if weights is None:  # then the class name contains the target (check_contains)
                        cls = "FusedMoE" if group == "experts" else "Linear"
                        weights = next((w for t, w in targets if _in_class(t, cls)), None)
                    fmt = None if weights is None else _ct_bytes(weights, group == "experts", name)
                per_layer.setdefault((group, index), set()).add(fmt)


def _in_class(target: str, cls: str) -> bool:
    """A class-name target: ``find_matched_target``'s ``_find_first_match(module.__class__.__name__, targets,
    True)`` (the target contained in the class name: ``Linear`` in ``QKVParallelLinear``, ``RowParallelLinear`` …);
    the fused MoE also takes the ``Linear`` target (``_add_fused_moe_to_target_scheme_map``)."""
    if not target or target.startswith("re:"):
        return False
    return target.lower() in cls.lower() or (cls == "FusedMoE" and target == "Linear")


def _matches(layer_name: str, target: str) -> bool:
    """vLLM ``compressed_tensors/utils.py`` ``_is_equal_or_regex_match``: ``re:`` + ``re.match``, else equality."""
    if target.startswith("re:"):
        return re.match(target[3:], layer_name) is not None
    return target == layer_name


def _ct_bytes(weights: Mapping[str, Any], moe: bool, name: str) -> float:
    """Bytes per weight of one compressed-tensors ``weights`` scheme (module docstring)."""
    bits = weights.get("num_bits")
    kind = str(weights.get("type") or "int").lower()
    strategy = str(weights.get("strategy") or "").lower()
    group = weights.get("group_size")
    if isinstance(bits, bool) or not isinstance(bits, int) or bits <= 0:
        raise CapacityError(f"{name}: a compressed-tensors config group has weights.num_bits {bits!r}; not sized")
    if kind == "float" and bits == 8:
        block = weights.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2:
            return 1 + 4 / (int(block[0]) * int(block[1]))
        return 1.0
    if strategy == "group" and isinstance(group, int) and not isinstance(group, bool) and group > 0:
        if kind == "float":  # NVFP4: an fp8 scale per group
            return (bits + 8 / group) / 8
        zeros = bits / group if not moe and weights.get("symmetric") is False else 0.0
        return (bits + 16 / group + zeros) / 8
    if strategy in ("channel", "tensor"):
        return bits / 8
    raise CapacityError(
        f"{name}: compressed-tensors weights of {bits}-bit {kind} with strategy {strategy or 'unset'!r}: not sized"
    )
