"""Issue 16, kinds E and F: weight formats vLLM loads (bitsandbytes, MXFP4 padding, V0 MLA copies, GPTQ groups) and
config.json keys read as transformers' config classes define them (GPT-2, OPT, Falcon, Starcoder2, LLaVA, vision
towers). Expected values are published parameter counts or arithmetic from the engine's tensor shapes, written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.hardware import GIB
from advisor.capacity.kv import CapacityInputs, weights_bytes_per_gpu, weights_bytes_total
from advisor.capacity.models import ModelArch, get_preset
from advisor.errors import CapacityError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"  # sources: SOURCES.md there


def _fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


# --- kind F: config.json keys as transformers reads them ---------------------------------------------------------


def test_gpt2s_n_keys_are_read_and_its_count_is_the_published_one() -> None:
    # GPT2Config's attribute_map (n_embd, n_layer, n_head, n_positions); n_inner null → 4 × n_embd. Published:
    # 124,439,808 = wte 50257×768 + wpe 1024×768 + 12 × (c_attn 768×2304+2304, c_proj 768²+768, c_fc 768×3072+3072,
    # c_proj 3072×768+768, two LayerNorms 4×768) + ln_f 2×768, the LM head tied (refused before: no hidden_size)
    got = ModelArch.from_hf_config(_fixture("gpt2.json"), "gpt2")
    assert (got.hidden_size, got.num_layers, got.num_attention_heads, got.intermediate_size) == (768, 12, 12, 3072)
    assert got.max_position_embeddings == 1024 and got.tie_word_embeddings
    assert got.num_parameters == 124_439_808


def test_opts_ffn_dim_projections_and_learned_positions_give_its_published_count() -> None:
    # facebook/opt-350m: hidden 1024, ffn_dim 4096, word_embed_proj_dim 512 (project_in/project_out 512×1024 each),
    # 2048 + 2 learned positions (OPTLearnedPositionalEmbedding's offset), biases, LayerNorms with bias and no final
    # LayerNorm (do_layer_norm_before false): 25,739,264 + 2,099,200 + 1,048,576 + 24 × 12,596,224 = 331,196,416
    got = ModelArch.from_hf_config(_fixture("opt-350m.json"), "opt-350m")
    assert got.intermediate_size == 4096 and got.word_embed_proj_dim == 512 and not got.gated_mlp
    assert got.num_parameters == 331_196_416


def test_falcon_takes_one_kv_head_and_transformers_2048_position_default() -> None:
    # tiiuae/falcon-7b states no max_position_embeddings (FalconConfig: 2048) and multi_query true (one KV head,
    # vLLM falcon.py). Shapes: 32 × (query_key_value 4544×(4544+2×64) + dense 4544² + 2 × 4544×18176 MLP + one
    # LayerNorm 2×4544) + tied embedding 65024×4544 + ln_f 2×4544
    got = ModelArch.from_hf_config(_fixture("falcon-7b.json"), "falcon-7b")
    assert (got.num_kv_heads, got.max_position_embeddings, got.intermediate_size) == (1, 2048, 18176)
    layer = 4544 * (4544 + 2 * 64) + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    assert got.num_parameters == 32 * layer + 65024 * 4544 + 2 * 4544 == 6_921_720_704


def test_starcoder2_without_tie_word_embeddings_ties_as_its_config_class_does() -> None:
    # bigcode/starcoder2-3b's config.json (huggingface.co/bigcode/starcoder2-3b) states no tie_word_embeddings;
    # Starcoder2Config's __init__ takes none, so PretrainedConfig's True applies. Published: 3,030,371,328
    # (safetensors metadata, "3.03B"); untied it came to 3.18 B
    config = {
        "architectures": ["Starcoder2ForCausalLM"],
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 3072,
        "intermediate_size": 12288,
        "max_position_embeddings": 16384,
        "model_type": "starcoder2",
        "norm_type": "layer_norm",
        "num_attention_heads": 24,
        "num_hidden_layers": 30,
        "num_key_value_heads": 2,
        "sliding_window": 4096,
        "torch_dtype": "float32",
        "use_bias": True,
        "vocab_size": 49152,
    }
    assert ModelArch.from_hf_config(config, "starcoder2-3b").num_parameters == 3_030_371_328


def test_a_real_llava_text_config_takes_llama_defaults_and_its_vision_tower_is_counted() -> None:
    # llava-hf/llava-1.5-7b-hf: text_config states only max_position_embeddings and vocab_size (LlamaConfig gives
    # hidden 4096, intermediate 11008, 32 layers and heads). vLLM loads CLIP-L up to vision_feature_layer -2 (23 of
    # 24 layers, no post-LayerNorm); the published 7,063,427,072 holds all 24 and the post-LayerNorm: one CLIP-L
    # layer (4 × (1024² + 1024) + 2 × 1024 × 4096 + 4096 + 1024 + 4 × 1024) and 2 × 1024 more than vLLM loads
    got = ModelArch.from_hf_config(_fixture("llava-1.5-7b-hf.json"), "llava-1.5-7b")
    assert (got.hidden_size, got.intermediate_size, got.num_layers, got.vocab_size) == (4096, 11008, 32, 32064)
    skipped = 4 * (1024 * 1024 + 1024) + 2 * 1024 * 4096 + 4096 + 1024 + 4 * 1024 + 2 * 1024
    assert got.num_parameters + skipped == 7_063_427_072
    assert got.vision_parameters > 300_000_000


def test_a_qwen2_vl_vision_tower_is_counted_from_its_config_json() -> None:
    # Qwen/Qwen2-VL-7B-Instruct's config.json (huggingface.co/Qwen/Qwen2-VL-7B-Instruct): published 8,291,375,616
    # (safetensors metadata); with the vision tower uncounted a config.json gave 7.62 B
    config = {
        "architectures": ["Qwen2VLForConditionalGeneration"],
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "attention_bias": True,
        "vision_config": {
            "depth": 32,
            "embed_dim": 1280,
            "mlp_ratio": 4,
            "num_heads": 16,
            "in_chans": 3,
            "hidden_size": 3584,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "spatial_patch_size": 14,
            "temporal_patch_size": 2,
        },
    }
    assert ModelArch.from_hf_config(config, "qwen2-vl-7b").num_parameters == pytest.approx(8_291_375_616, rel=1e-5)


# --- kind E: weight formats --------------------------------------------------------------------------------------

LLAMA3_8B = {  # meta-llama/Meta-Llama-3-8B config.json (huggingface.co/meta-llama/Meta-Llama-3-8B)
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# unsloth/llama-3-8b-bnb-4bit's quantization_config (huggingface.co/unsloth/llama-3-8b-bnb-4bit, config.json)
BNB_4BIT = {
    "bnb_4bit_compute_dtype": "bfloat16",
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "llm_int8_enable_fp32_cpu_offload": False,
    "llm_int8_has_fp16_weight": False,
    "llm_int8_skip_modules": None,
    "llm_int8_threshold": 6.0,
    "load_in_4bit": True,
    "load_in_8bit": False,
    "quant_method": "bitsandbytes",
}
# the linear layers of one Llama-3-8B decoder layer: (input rows, output columns)
LLAMA3_LINEARS = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]
LLAMA3_REST = 2 * 128256 * 4096 + (2 * 32 + 1) * 4096  # embedding, LM head, RMSNorms: bfloat16


def _bnb4_layer_bytes(rows: int, cols: int) -> float:
    """vLLM bitsandbytes.py create_qweight_for_4bit: rows × cols / 2 uint8; the loader's dequantize_dq leaves one
    fp32 absmax per 64 weights (quantize_4bit's blocksize) on the GPU."""
    return rows * cols / 2 + rows * cols / 64 * 4


def _bnb8_layer_bytes(rows: int, cols: int) -> float:
    """create_qweight_for_8bit: an int8 [cols, rows] weight and an fp32 SCB per output column (row of the weight)."""
    return rows * cols + cols * 4


def _total(config: dict[str, Any], **inputs: Any) -> int:
    return weights_bytes_total(
        CapacityInputs(model=ModelArch.from_hf_config(config, "m"), gpu_memory_bytes=80 * GIB, **inputs)
    )


def test_a_bitsandbytes_4bit_checkpoint_is_costed_at_half_a_byte_plus_fp32_absmax_per_64() -> None:
    # refused before ("unknown quantization 'bitsandbytes'")
    expected = 32 * sum(_bnb4_layer_bytes(r, c) for r, c in LLAMA3_LINEARS) + LLAMA3_REST * 2
    assert _total({**LLAMA3_8B, "quantization_config": BNB_4BIT}) == pytest.approx(expected, abs=2)
    # an unquantized checkpoint with --quantization bitsandbytes is quantized in flight to the same 4-bit NF4
    assert _total(LLAMA3_8B, quantization="bitsandbytes") == pytest.approx(expected, abs=2)


def test_a_bitsandbytes_8bit_checkpoint_is_costed_at_one_byte_plus_row_scales() -> None:
    qc = {**BNB_4BIT, "load_in_4bit": False, "load_in_8bit": True}
    expected = 32 * sum(_bnb8_layer_bytes(r, c) for r, c in LLAMA3_LINEARS) + LLAMA3_REST * 2
    # row scales are taken at 4 bytes per hidden_size inputs: down_proj's 14,336 rows are overstated (≤ 0.02 %)
    assert _total({**LLAMA3_8B, "quantization_config": qc}) == pytest.approx(expected, rel=2e-4)


def test_mxfp4_experts_are_padded_for_the_kernel_the_gpu_runs() -> None:
    # vLLM mxfp4.py Mxfp4MoEMethod.create_weights, Marlin (Hopper without triton_kernels, Ampere, Ada): hidden
    # round_up 256, intermediate per partition round_up 128. gpt-oss-120b (36 MoE layers × 128 experts, hidden and
    # intermediate 2880): w13 2 × I × H and w2 H × I at 4.25 bits; 2880 → 3072 and 2880 → 2944 at TP 1
    model = get_preset("openai/gpt-oss-120b")

    def per_gpu(cc: tuple[int, int] | None, tp: int = 1) -> int:
        return weights_bytes_per_gpu(
            CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, tensor_parallel_size=tp, compute_capability=cc)
        )

    bits = 4 + 8 / 32
    marlin_tp1 = 36 * 128 * 3 * (3072 * 2944 - 2880 * 2880) * bits / 8
    assert per_gpu((9, 0)) - per_gpu(None) == pytest.approx(marlin_tp1, abs=2)
    assert marlin_tp1 / GIB == pytest.approx(5.13, abs=0.01)  # the "about +5 GiB"
    assert per_gpu((8, 9)) == per_gpu((9, 0))  # Ada: Marlin as well
    # TP 4: 720 intermediate columns per rank → 768; the hidden size is not split
    marlin_tp4 = 36 * 128 * 3 * (3072 * 768 - 2880 * 720) * bits / 8
    assert per_gpu((9, 0), 4) - per_gpu(None, 4) == pytest.approx(marlin_tp4, abs=2)
    # SM100 with FlashInfer (SM100_FI_MXFP4_BF16): both round_up 256
    assert per_gpu((10, 0)) - per_gpu(None) == pytest.approx(
        36 * 128 * 3 * (3072 * 3072 - 2880 * 2880) * bits / 8, abs=2
    )


def test_v0_mla_keeps_bf16_w_qr_and_a_dequantized_kv_b_proj_beside_fp8_weights() -> None:
    # vLLM 0.7.3 logged "Loading model weights took 83.88 GiB" per rank for DeepSeek-R1 FP8 at TP 8 (the start-up
    # log cited in test_vllm_startup_logs.py); MLACommonImpl.process_weights_after_loading (0.7.x) keeps W_QR
    # (q_lora 1536 × 16 heads × rope 64) and the dequantized kv_b_proj (512 × 16 × (128 + 128)) in bfloat16 on
    # every layer: 61 × (1536·16·64 + 512·16·256) × 2 B = 0.417 GiB the model lacked (83.36 GiB, −0.62 %)
    inputs = CapacityInputs(
        model=get_preset("deepseek-ai/DeepSeek-R1"),
        gpu_memory_bytes=int(139.81 * GIB),
        tensor_parallel_size=8,
        overhead_profile="vllm-v0",
    )
    assert weights_bytes_per_gpu(inputs) / GIB == pytest.approx(83.88, rel=0.002)


def test_a_gptq_checkpoint_without_bits_is_refused_naming_the_key() -> None:
    # vLLM gptq.py GPTQConfig.from_config: cls.get_from_keys(config, ["bits"]) raises without the key
    config = {**LLAMA3_8B, "quantization_config": {"quant_method": "gptq", "group_size": 128}}
    with pytest.raises(CapacityError, match="'bits'"):
        ModelArch.from_hf_config(config, "gptq-no-bits")


def test_a_group_size_that_does_not_divide_a_layers_rows_per_rank_is_refused() -> None:
    # vLLM gptq.py create_weights: "The input size is not aligned with the quantized weight shape. This can be
    # caused by too large tensor parallel size." Llama-3-8B down_proj: 14,336 rows; at TP 8 1,792 per rank, which
    # groups of 128 divide (14 groups); groups of 1,024 do not (1.75)
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 1024}
    model = ModelArch.from_hf_config({**LLAMA3_8B, "quantization_config": qc}, "gptq-1024")
    CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, tensor_parallel_size=2)  # 7,168 rows: 7 groups
    with pytest.raises(CapacityError, match="does not divide"):
        CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, tensor_parallel_size=8)
    ok = ModelArch.from_hf_config({**LLAMA3_8B, "quantization_config": {**qc, "group_size": 128}}, "gptq-128")
    CapacityInputs(model=ok, gpu_memory_bytes=80 * GIB, tensor_parallel_size=8)


@pytest.mark.parametrize(
    ("model_id", "version", "logged_gib", "source"),
    [
        ("openai/gpt-oss-120b", "0.11.2", 65.9651, "Marlin: blog.huikang.dev 2025-12-28 (Kaggle), vllm#23278"),
        ("openai/gpt-oss-120b", "0.14.1", 64.38, "Triton, original scales kept: vllm-project/vllm#33155"),
        ("openai/gpt-oss-20b", "0.19.0", 13.64, "Triton, triton_kernels v3.6.0 K padding: llm-d-planner d3121e05"),
        ("openai/gpt-oss-120b", "0.25.1", 61.29, "Triton, scales deleted (vllm#46549): JaminJeong/CodingAgent 46559ab"),
    ],
)
def test_gpt_oss_weights_on_hopper_follow_the_mxfp4_backend_of_the_release(
    model_id: str, version: str, logged_gib: float, source: str
) -> None:
    """Hopper runs MXFP4 experts on Marlin until triton_kernels ships with vLLM (0.12.0, vllm-project/vllm#28788),
    on Triton after: no weight padding, but the original E8M0 scales stay beside the rearranged copy until 0.25,
    the rearranged scales pad N to 256, the biases are fp32, and triton_kernels v3.6.0 (0.17-0.21) pads the packed K
    to 64 bytes. Each figure is the release's own "Model loading took … GiB" line on an H100 (``source``)."""
    inputs = CapacityInputs(
        model=get_preset(model_id), gpu_memory_bytes=80 * GIB, compute_capability=(9, 0), engine_version=version
    )
    assert weights_bytes_per_gpu(inputs) / GIB == pytest.approx(logged_gib, rel=0.007)
