"""Mamba-2 hybrids in vLLM V1 (issue 16, kind G): Granite-4.0-H, Nemotron-H, Bamba.

Before 2026-12-06 the capacity pass refused them ("does not size Mamba-2 layers"): every start-up log of one was a
case with no answer. The rules (vLLM 0.19.0 unless marked): ``layers/mamba/mamba_utils.py``
``MambaStateShapeCalculator.mamba2_state_shape`` (conv ``(kernel − 1) × (intermediate + 2 × groups × state) ÷ TP``,
the groups padded to TP when TP does not divide them; SSM ``heads ÷ TP × head_dim × state``),
``MambaStateDtypeCalculator`` (the model dtype, or the SSM dtype Nemotron-H's config hook sets),
``models/config.py`` ``HybridAttentionMambaModelConfig`` (the attention block raised to hold a state page, the state
padded to it), ``v1/core/kv_cache_utils.py`` (groups of the smaller layer count; ``num_blocks // groups × block``
tokens before 0.21), ``nemotron_h.py`` (one block per ``hybrid_override_pattern`` character).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from advisor.capacity.kv import CapacityInputs, vllm_capacity_pass
from advisor.capacity.kvlayout import recurrent_hybrid_layout, recurrent_state_page_bytes
from advisor.capacity.models import ModelArch
from advisor.errors import CapacityError
from advisor.modelfile import resolve_model

GIB = 1024**3
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRANITE_1B = resolve_model(str(FIXTURES / "truth_models" / "ibm-granite__granite-4.0-h-1b.json"), Path("."))
NEMOTRON3_NANO = resolve_model(
    str(FIXTURES / "hf_configs" / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"), Path(".")
)


def _inputs(model: ModelArch, **kw: object) -> CapacityInputs:
    return CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, dtype="bfloat16", **kw)  # type: ignore[arg-type]


def test_granite_4_0_h_1b_on_vllm_0_19_matches_the_logged_block_padding_tokens_and_concurrency() -> None:
    # tests/capacity/truth/vllm_v1.yaml granite-4.0-h-1b-rtx3060-12g-v0190-eager-4k: "Setting attention block size
    # to 400 tokens", "Padding mamba page size by 1.59%", "Available KV cache memory: 4.09 GiB", "GPU KV cache size:
    # 53,200 tokens", "Maximum concurrency for 4,096 tokens per request: 66.95x".
    # State 3 × (3,072 + 2 × 128) + 48 × 64 × 128 = 403,200 elements × 2 B = 806,400 B; attention 2 × 4 × 128 × 2 B
    # = 2,048 B a token a layer; block 16 × cdiv(806,400, 32,768) = 400; page 819,200 B (+1.59 %); groups of
    # min(4, 36) = 4: 1 attention + 9 Mamba; a request holds cdiv(4,096, 400) = 11 + 9 pages.
    inputs = _inputs(GRANITE_1B, engine_version="0.19.0", max_model_len=4096, enable_prefix_caching=False)
    assert recurrent_state_page_bytes(inputs) == 806_400
    layout = recurrent_hybrid_layout(inputs)
    assert layout is not None
    assert layout.block_size == 400  # engine
    assert round(100 * (layout.page_bytes / layout.state_bytes - 1), 2) == 1.59  # engine
    assert (layout.attention_groups, layout.recurrent_groups, layout.group_size) == (1, 9, 4)
    got = vllm_capacity_pass(dataclasses.replace(inputs, num_gpu_blocks_override=1339))
    assert got.kv_cache_tokens == 53_200  # engine: 1,339 // 10 × 400
    assert round(got.max_concurrency, 2) == 66.95  # engine: 1,339 ÷ 20
    # 4.09 GiB is 4.085-4.095: 1,338.6-1,341.9 blocks of 4 pages; tokens 53,200 or 53,600 within that rounding
    low = vllm_capacity_pass(dataclasses.replace(inputs, kv_cache_memory_bytes=int(4.085 * GIB)))
    assert low.kv_cache_tokens == 53_200


def test_granite_4_0_h_1b_weights_are_the_logged_2_72_gib_within_2_percent() -> None:
    # "Model loading took 2.72 GiB memory": 36 Mamba-2 mixers (in_proj 1,536 × 6,448, conv 3,328 × 4 + bias, out_proj
    # 3,072 × 1,536 …), 4 attention blocks, 40 gated MLPs 4,096 wide, a tied 100,352-row embedding, in bf16
    assert GRANITE_1B.linear_layers == 36 and GRANITE_1B.attention_layers == 4
    assert 2 * GRANITE_1B.num_parameters / GIB == pytest.approx(2.72, rel=0.02)


def test_nemotron_3_nano_folds_its_pattern_and_counts_the_published_31_6b() -> None:
    # https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16: 31.6B total, "23 Mamba-2 and MoE layers,
    # along with 6 Attention layers"; 128 experts + 1 shared, 6 per token, ReLU² (non-gated) experts; ~3.2B active,
    # 3.6B with embeddings. Read as a dense stack it was 102 B with every layer caching KV.
    m = NEMOTRON3_NANO
    assert (m.linear_layers, m.attention_layers, m.moe_layers, m.mlp_free_layers) == (23, 6, 23, 6)
    assert not m.gated_experts and not m.gated_mlp
    assert m.num_shared_experts == 2  # the shared expert is 3,712 wide: two 1,856-wide expert widths
    assert m.num_parameters == pytest.approx(31.6e9, rel=0.01)
    assert m.active_parameters() == pytest.approx(3.6e9, rel=0.03)


def test_nemotron_h_state_dtype_follows_the_config_hook_by_release() -> None:
    # conv 3 × (4,096 + 2 × 8 × 128) = 18,432 elements in bf16; SSM 64 × 64 × 128 = 524,288 elements. vLLM 0.11 has
    # no NemotronH hook (the model dtype); from 0.13 the config's mamba_ssm_cache_dtype (float32 here) is taken.
    assert recurrent_state_page_bytes(_inputs(NEMOTRON3_NANO, engine_version="0.11.0")) == 2 * (18_432 + 524_288)
    fp32 = 2 * 18_432 + 4 * 524_288
    assert recurrent_state_page_bytes(_inputs(NEMOTRON3_NANO, engine_version="0.19.0")) == fp32
    # a config without the key takes the hook's default: float16 at 0.13-0.19, float32 from 0.20
    bare = dataclasses.replace(NEMOTRON3_NANO, mamba_ssm_dtype=None)
    assert recurrent_state_page_bytes(_inputs(bare, engine_version="0.19.0")) == 2 * (18_432 + 524_288)
    assert recurrent_state_page_bytes(_inputs(bare, engine_version="0.20.1")) == fp32
    # fp8 KV (2 × 2 heads × 128 × 1 B = 512 B a token a layer): block 16 × cdiv(2,134,016, 8,192) = 4,176 tokens
    layout = recurrent_hybrid_layout(_inputs(NEMOTRON3_NANO, engine_version="0.20.1", kv_cache_dtype="fp8"))
    assert layout is not None and layout.block_size == 4176


def test_a_single_group_is_kept_whole_on_every_tensor_parallel_rank() -> None:
    # n_groups 1 at TP 2: extra_groups_for_head_shards pads to 2 groups, so a rank's conv state is 3 × (3,072 + 2 × 2
    # × 128) ÷ 2 = 5,376 elements (not 4,992); its SSM state 24 × 64 × 128 = 196,608
    page = recurrent_state_page_bytes(_inputs(GRANITE_1B, engine_version="0.19.0", tensor_parallel_size=2))
    assert page == 2 * (5_376 + 196_608)


def test_mamba2_prefix_caching_modes_by_release() -> None:
    # 0.26-0.27 prefix caching on by default: Granite implements SupportsMambaPrefixCaching → the "all" mode (not
    # modelled);
    # 0.28+: 'align' for every hybrid, 2 state pages; 0.34: Mamba-2's prefill checkpoint makes it 3
    with pytest.raises(CapacityError, match="--no-enable-prefix-caching"):  # not sized: refused, naming the way out
        recurrent_hybrid_layout(_inputs(GRANITE_1B, engine_version="0.26.0", max_model_len=4096))
    off = _inputs(GRANITE_1B, engine_version="0.26.0", max_model_len=4096, enable_prefix_caching=False)
    assert recurrent_hybrid_layout(off) is not None
    at_28 = recurrent_hybrid_layout(_inputs(GRANITE_1B, engine_version="0.28.0", max_model_len=4096))
    at_34 = recurrent_hybrid_layout(_inputs(GRANITE_1B, engine_version="0.34.0", max_model_len=4096))
    assert at_28 is not None and at_28.state_pages == 2
    assert at_34 is not None and at_34.state_pages == 3


def test_falcon_h1_and_zamba2_are_still_refused_naming_their_key() -> None:
    for model_type, key in (("falcon_h1", "mamba_d_ssm"), ("zamba2", "layers_block_type")):
        cfg = {
            "model_type": model_type,
            "hidden_size": 1024,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "intermediate_size": 2048,
            "vocab_size": 1000,
            "max_position_embeddings": 4096,
        }
        with pytest.raises(CapacityError, match=key):
            ModelArch.from_hf_config(cfg, model_type)


def test_a_nemotron_pattern_with_more_mlp_than_mixer_layers_is_refused_naming_it() -> None:
    cfg = {
        "model_type": "nemotron_h",
        "hybrid_override_pattern": "M--*--",
        "hidden_size": 1024,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "intermediate_size": 2048,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }
    with pytest.raises(CapacityError, match="hybrid_override_pattern"):
        ModelArch.from_hf_config(cfg, "nemotron")
    with pytest.raises(CapacityError, match="hybrid_override_pattern"):
        ModelArch.from_hf_config({**cfg, "hybrid_override_pattern": "MX*-"}, "nemotron")


def test_the_ceiling_at_a_typical_length_counts_the_state_groups_of_the_one_pool() -> None:
    # Nemotron-3-Nano on 0.19 (6 attention + 23 Mamba layers: groups of 6, 1 attention + 4 Mamba groups): a 2,500-token
    # request holds cdiv(2,500, 2,096) = 2 attention pages + 4 state pages of the pool's blocks. Before, the ceiling
    # divided the per-group blocks by the attention pages alone (860 // 5 ÷ 2 = 86 for 860 blocks).
    got = vllm_capacity_pass(
        _inputs(NEMOTRON3_NANO, engine_version="0.19.0", max_model_len=32768, num_gpu_blocks_override=860)
    )
    assert got.block_size == 2096  # 16 × cdiv(2,134,016, 16 × 1,024)
    assert got.concurrency_at(2500) == pytest.approx(860 / 6)
    assert got.max_concurrency == pytest.approx(860 / (16 + 4))


BAMBA = {
    # ibm-ai-platform/Bamba-9B config.json keys (transformers BambaConfig): the layout is attn_layer_indices; its
    # layers_block_type is a property of the config class, never in the file
    "architectures": ["BambaForCausalLM"],
    "model_type": "bamba",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "attn_layer_indices": [9, 18, 27],
    "mamba_n_heads": 128,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 128,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "vocab_size": 128256,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def test_bamba_reads_its_attention_layers_from_attn_layer_indices() -> None:
    # breaker, 2026-12-06: the published layout was read as 32 attention layers (dense, 8.0 B) instead of 3
    m = ModelArch.from_hf_config(BAMBA, "bamba")
    assert (m.attention_layers, m.linear_layers) == (3, 29)
    assert m.num_parameters == pytest.approx(9.78e9, rel=0.02)  # Bamba-9B: 9.78 B (the model card's "9B")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"attn_layer_indices": None}, "no attention layer"),
        ({"attn_layer_indices": [40]}, "attn_layer_indices"),
    ],
)
def test_a_bamba_layout_without_attention_or_out_of_range_is_refused_naming_it(change: dict, key: str) -> None:
    with pytest.raises(CapacityError, match=key):
        ModelArch.from_hf_config({**BAMBA, **change}, "bamba")


def test_granite_layer_types_must_be_mamba_or_attention() -> None:
    cfg = json.loads((FIXTURES / "truth_models" / "ibm-granite__granite-4.0-h-1b.json").read_text())
    for odd in ("mamba2", "MAMBA"):
        bad = {**cfg, "layer_types": [odd, *cfg["layer_types"][1:]]}
        with pytest.raises(CapacityError, match="layer_types"):
            ModelArch.from_hf_config(bad, "granite")
    with pytest.raises(CapacityError, match="no attention layer"):
        ModelArch.from_hf_config({**cfg, "layer_types": ["mamba"] * 40}, "granite")


def test_nemotron_h_needs_its_expert_count_and_a_known_state_dtype() -> None:
    cfg = json.loads((FIXTURES / "hf_configs" / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())
    with pytest.raises(CapacityError, match="n_routed_experts"):
        ModelArch.from_hf_config({k: v for k, v in cfg.items() if k != "n_routed_experts"}, "nemotron")
    with pytest.raises(CapacityError, match="mamba_ssm_cache_dtype"):
        ModelArch.from_hf_config({**cfg, "mamba_ssm_cache_dtype": "float8"}, "nemotron")


def test_tensor_parallelism_must_split_the_mamba_heads_and_groups() -> None:
    # vLLM MambaMixer2 asserts TP divides the heads, and the groups unless there is one: Nemotron-3-Nano's 8 groups
    # do not split over 16 ranks (64 heads do); Granite-4.0-H-1B's one group is kept whole on every rank
    with pytest.raises(CapacityError, match="n_groups"):
        vllm_capacity_pass(_inputs(NEMOTRON3_NANO, engine_version="0.19.0", tensor_parallel_size=16))
    vllm_capacity_pass(_inputs(NEMOTRON3_NANO, engine_version="0.19.0", tensor_parallel_size=8))
    with pytest.raises(CapacityError, match="mamba_n_heads"):
        vllm_capacity_pass(_inputs(dataclasses.replace(GRANITE_1B, mamba_heads=46), tensor_parallel_size=4))
