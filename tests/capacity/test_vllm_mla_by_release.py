"""DeepSeek V2/V3 KV cache by vLLM release: multi-head attention before 0.7.1, the MLA latent after.

Expected bytes are hand arithmetic from vLLM's own model file at each release (``deepseek_v2.py``
``DeepseekV2Attention``: ``Attention(self.num_local_heads, 256, ...)`` at v0.6.3.post1-v0.6.6,
``Attention(self.num_local_heads, self.qk_head_dim, ...)`` at v0.7.0) and ``vllm/config.py`` ``use_mla`` (v0.7.1,
v0.7.2: MLA off for quantizations other than fp8 and compressed-tensors; v0.7.3: no such condition).
"""

from __future__ import annotations

import json

import pytest

from advisor.cli import main

GIB = 1 << 30
DEEPSEEK_V3_TP8 = ["--model", "deepseek-ai/DeepSeek-V3", "--gpu", "h100-sxm", "--tp", "8", "--pp", "2"]
PER_LAYER = {
    "0.6.6": 2 * (128 // 8) * 256 * 2,  # K and V of 16 local heads padded to 256 elements, bf16 cache
    "0.7.0": 2 * (128 // 8) * (128 + 64) * 2,  # qk_head_dim = qk_nope 128 + qk_rope 64; V padded to it
    "0.7.3": 1280,  # the 576-element bf16 latent (1,152 B) aligned to 256 B by V0's cache engine
}


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, int]:
    assert main(["plan", *DEEPSEEK_V3_TP8, "--max-model-len", "8192", *args, "--json"]) == 0
    out: dict[str, int] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("version", sorted(PER_LAYER))
def test_kv_bytes_per_token_follow_the_release_that_runs_deepseek(
    version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(capsys, "--engine-version", version)
    layers = 31  # 61 layers over 2 pipeline stages: the fuller stage holds 31
    assert out["kv_cache_bytes_per_token_per_gpu"] == PER_LAYER[version] * layers


def test_the_published_0_6_6_log_of_deepseek_v3_is_the_multi_head_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """github.com/AUGMXNT/llm-tracker.info-vault (``DeepSeek-V3 Testing.md``, commit b56234c): vLLM 0.6.6.post2.dev5,
    PP 2 × TP 8 on H100 80GB, "# GPU blocks: 2889" at max_model_len 8192. 2,889 blocks × 16 tokens × 31 layers ×
    16,384 B = 21.87 GiB per GPU: a plausible KV cache on an 80 GB GPU beside 42 GB of FP8 weights, where the MLA
    latent would make the same pool 12.8× as many blocks."""
    out = _plan(capsys, "--engine-version", "0.6.6", "--kv-cache-memory-gib", f"{2889 * 16 * 31 * 16384 / GIB:.4f}")
    assert abs(out["kv_cache_blocks"] - 2889) <= 1


def test_0_7_1_and_0_7_2_drop_mla_for_an_awq_checkpoint_and_0_7_3_keeps_it() -> None:
    from dataclasses import replace
    from pathlib import Path

    from advisor.capacity.kv import CapacityInputs, kv_bytes_per_token_per_layer
    from advisor.modelfile import resolve_model

    model = resolve_model("deepseek-ai/DeepSeek-V2-Lite", Path.cwd())
    base = CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, overhead_profile="vllm-v0", quantization="awq")
    heads = model.num_attention_heads
    assert kv_bytes_per_token_per_layer(replace(base, engine_version="0.7.2")) == 2 * heads * 192 * 2
    assert kv_bytes_per_token_per_layer(replace(base, engine_version="0.7.3")) == 1280
    assert kv_bytes_per_token_per_layer(replace(base, engine_version="0.7.2", quantization="fp8")) == 1280
