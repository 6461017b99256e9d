"""Granite-4.0 dense checkpoints (``granitemoehybrid`` with every ``layer_types`` entry ``attention``, no experts).

vLLM v0.11.0 ``vllm/model_executor/models/granitemoehybrid.py`` ``GraniteMoeHybridAttentionDecoderLayer.__init__``
builds ``block_sparse_moe`` only when ``num_local_experts > 0`` and the layer's MLP is ``shared_mlp``
(``GraniteMoeSharedMLP``, ``shared_intermediate_size`` wide); ``ModelConfig.is_hybrid`` (vllm/config/model.py) notes the
"granite-4.0-micro case which uses hybrid config but does not actually contain any non-attention layers". Such a
config states ``num_local_experts: 0`` and ``num_experts_per_tok: 0``, which the loader refused ("must be a positive
integer") before. Expected counts are hand arithmetic from the keys written here.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor.modelfile import resolve_model

LAYERS, HIDDEN, HEADS, KV_HEADS, VOCAB = 40, 2560, 40, 8, 100352
HEAD = HIDDEN // HEADS  # 64


def _config(tmp_path: Path, *, intermediate: int, shared: int) -> str:
    cfg = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "intermediate_size": intermediate,
        "shared_intermediate_size": shared,
        "num_local_experts": 0,
        "num_experts_per_tok": 0,
        "layer_types": ["attention"] * LAYERS,
        "position_embedding_type": "rope",
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "vocab_size": VOCAB,
        "max_position_embeddings": 131072,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return str(path)


def _hand_params(mlp_width: int) -> int:
    attention = HIDDEN * HEADS * HEAD * 2 + HIDDEN * KV_HEADS * HEAD * 2  # q, o; k, v
    mlp = 3 * HIDDEN * mlp_width  # gate+up (input_linear, 2 × width) and down (output_linear)
    norms = 2 * HIDDEN
    return LAYERS * (attention + mlp + norms) + VOCAB * HIDDEN + HIDDEN  # tied embeddings, final norm


def test_dense_granite_with_zero_experts_loads_as_a_dense_stack(tmp_path: Path) -> None:
    # granite-4.0-micro's shapes: 40 x (15,728,640 + 62,914,560 + 5,120) + 256,901,120 + 2,560 = 3,402,836,480
    model = resolve_model(_config(tmp_path, intermediate=8192, shared=8192))
    assert model.num_experts == 0
    assert model.num_parameters == _hand_params(8192) == 3_402_836_480
    assert model.attention_layers == LAYERS


def test_dense_granite_mlp_is_shared_intermediate_size_wide(tmp_path: Path) -> None:
    # vLLM sizes the dense layer's MLP from shared_intermediate_size (GraniteMoeSharedMLP), not intermediate_size
    model = resolve_model(_config(tmp_path, intermediate=1024, shared=8192))
    assert model.num_parameters == _hand_params(8192)
