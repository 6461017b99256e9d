"""MLA's attention FLOPs use the widths its kernels compute over: decode in the latent (QKᵀ over kv_lora_rank +
qk_rope_head_dim, PV over kv_lora_rank), prefill with K and V expanded per head (qk_nope + qk_rope, v_head_dim), not
``hidden ÷ heads`` (56 on DeepSeek-V3). Sources: vLLM ``v1/attention/backends/mla/common.py`` (``_forward_decode``,
``_forward_prefill``); DeepSeek-V3's config (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128,
v_head_dim 128, 61 layers)."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.capacity.kv import CapacityInputs
from advisor.capacity.kvlayout import attended_head_tokens, prefill_attended_head_pairs
from advisor.capacity.models import get_preset

DSV3 = get_preset("deepseek-v3")
LLAMA_8B = get_preset("llama-3.1-8b")


def test_deepseek_v3_decodes_over_544_and_prefills_over_160_elements_a_head() -> None:
    assert DSV3.decode_attention_head_size == (576 + 512) / 2
    assert DSV3.prefill_attention_head_size == (192 + 128) / 2
    inputs = CapacityInputs(model=DSV3, gpu_memory_bytes=141 * 2**30, max_model_len=32768, tensor_parallel_size=8)
    # every one of the 61 layers is a full MLA layer: 544 × 61 × 32,768 tokens attended by each query head
    assert attended_head_tokens(inputs, 32768) == pytest.approx(544 * 61 * 32768)
    assert prefill_attended_head_pairs(inputs, 4096) == pytest.approx(160 * 61 * 4096 * 4096 / 2)
    # at PP 2 the fullest stage holds 31 layers
    staged = dataclasses.replace(inputs, pipeline_parallel_size=2)
    assert attended_head_tokens(staged, 1000) == pytest.approx(544 * 31 * 1000)


def test_other_models_keep_their_head_size() -> None:
    assert LLAMA_8B.decode_attention_head_size == LLAMA_8B.prefill_attention_head_size == 128
    inputs = CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=80 * 2**30, max_model_len=8192)
    assert attended_head_tokens(inputs, 1000) == pytest.approx(128 * 32 * 1000)
