"""Issue 16, kind G: recurrent hybrids (Gated DeltaNet + full attention) under vLLM V1's one-page-size KV layout.

vLLM V1 raises the attention block until one attention page holds a recurrent layer's state, pads the state to that
page, puts the layers in KV cache groups of equal layer counts and sizes ``num_blocks = available // page //
group_size`` (``vllm/model_executor/models/config.py`` ``HybridAttentionMambaModelConfig``, v0.10.0-v0.18.0, then
``vllm/platforms/interface.py`` ``Platform._align_hybrid_block_size``; ``vllm/v1/core/kv_cache_utils.py``
``_get_kv_cache_groups_uniform_page_size``, ``get_kv_cache_config_from_groups``). It prints ``num_blocks // groups
× min(block sizes)`` tokens before 0.21 and ``int(max_concurrency × max_model_len)`` from 0.21.

Every expected number is the engine's log or hand arithmetic on that source, written out in the test.
State per recurrent layer (``mamba_utils.py`` ``gated_delta_net_state_shape``): conv ``(kernel − 1) × (2 × k_heads
× k_dim + v_heads × v_dim)`` in the model dtype and temporal ``v_heads × v_dim × k_dim`` in ``mamba_ssm_dtype``
(Qwen3.5 / 3.6 configs: float32, applied by ``Qwen3_5ForConditionalGenerationConfig``; Qwen3-Next: the model dtype),
each divided over TP.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from advisor.capacity.kv import CapacityInputs, vllm_capacity_pass
from advisor.capacity.models import ModelArch
from advisor.modelfile import resolve_model
from tests.capacity.test_models import GEMMA3_1B

GIB = 1 << 30
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QWEN35_9B = resolve_model(str(FIXTURES / "truth_models" / "Qwen__Qwen3.5-9B.json"), Path("."))
QWEN35_27B = resolve_model(str(FIXTURES / "hf_configs" / "Qwen__Qwen3.5-27B.json"), Path("."))
QWEN36_35B = resolve_model(str(FIXTURES / "truth_models" / "nvidia__Qwen3.6-35B-A3B-NVFP4.json"), Path("."))
QWEN3_NEXT = resolve_model(str(FIXTURES / "hf_configs" / "Qwen__Qwen3-Next-80B-A3B-Thinking.json"), Path("."))


def _run(model: ModelArch, **kw: object) -> CapacityInputs:
    fields: dict[str, object] = {"gpu_memory_bytes": 80 * GIB, "dtype": "bfloat16", **kw}
    return CapacityInputs(model=model, **fields)  # type: ignore[arg-type]


# Qwen3.5-9B (8 full-attention + 24 Gated DeltaNet layers; 4 KV heads × 256; GDN 16 k heads, 32 v heads, dims 128,
# kernel 4): fp8 KV = 2 × 4 × 256 × 1 B = 2,048 B per token per layer; state 3 × 8,192 × 2 B + 32 × 128 × 128 × 4 B
# = 49,152 + 2,097,152 = 2,146,304 B; block 16 × cdiv(2,146,304, 16 × 2,048) = 16 × 66 = 1,056 tokens (the log's
# "Setting attention block size to 1056 tokens"); page 1,056 × 2,048 = 2,162,688 B; groups of min(8, 24) = 8
# layers: 1 attention + 3 recurrent = 4 groups; a pool block = 8 pages = 17,301,504 B.
QWEN35_9B_POOL_BLOCK = 8 * 1056 * 2048


def test_qwen3_5_9b_on_vllm_0_18_matches_the_logged_tokens_and_concurrency() -> None:
    # tests/capacity/truth/vllm_v1.yaml qwen3.5-9b-l40s-modal-v0180 (vLLM 0.18.0, --kv-cache-dtype fp8,
    # --max-model-len 65536, --enable-prefix-caching): "Available KV cache memory: 20.27 GiB", "GPU KV cache size:
    # 331,584 tokens", "Maximum concurrency for 65,536 tokens per request: 18.23x".
    # 20.27 GiB ÷ 17,301,504 B = 1,257.9 → the engine's num_blocks is 1,257 or 1,258 (the GiB is rounded);
    # tokens = num_blocks // 4 × 1,056 = 314 × 1,056 = 331,584 either way.
    # Prefix caching on, Qwen3.5 has no Mamba prefix caching → 'align' mode: a request holds cdiv(65,536, 1,056) =
    # 63 attention pages + 3 groups × 2 state pages = 69 blocks; 1,258 / 69 = 18.232 → "18.23x" (1,257 → 18.22).
    got = vllm_capacity_pass(
        _run(
            QWEN35_9B,
            engine_version="0.18.0",
            max_model_len=65536,
            kv_cache_dtype="fp8",
            enable_prefix_caching=True,
            num_gpu_blocks_override=1258,
        )
    )
    assert got.block_size == 1056
    assert got.kv_cache_tokens == 331_584  # engine; was 1258 × 16 = 20,128 with the blocks read as 16-token blocks
    assert round(got.max_concurrency, 2) == 18.23  # engine
    from_gib = vllm_capacity_pass(
        _run(
            QWEN35_9B,
            engine_version="0.18.0",
            max_model_len=65536,
            kv_cache_dtype="fp8",
            kv_cache_memory_bytes=int(20.27 * GIB),
        )
    )
    assert from_gib.kv_cache_tokens == 331_584  # engine; was 1,328,400: 16-token blocks of the 8 attention layers


def test_qwen3_next_keeps_its_state_in_bf16_and_splits_it_over_tp_on_vllm_0_11() -> None:
    # Qwen3-Next-80B-A3B (48 layers, every 4th full attention: 12 full + 36 GDN; 2 KV heads × 256; no
    # mamba_ssm_dtype → the temporal state in bf16). TP 2: 1 KV head per GPU → 2 × 1 × 256 × 2 B = 1,024 B per token
    # per layer; state per GPU 3 × 4,096 × 2 B + 16 × 128 × 128 × 2 B = 24,576 + 524,288 = 548,864 B.
    # Block 16 × cdiv(548,864, 16 × 1,024) = 16 × 34 = 544 tokens; page 544 × 1,024 = 557,056 B; groups of 12: 1 + 3;
    # pool block 12 × 557,056 = 6,684,672 B. 10 GiB // 6,684,672 = 1,606 blocks.
    # v0.11.0 _get_kv_cache_config_uniform_page_size: tokens = 1,606 // 4 × min(544, mamba block = max_model_len)
    # = 401 × 544 = 218,144. Concurrency (MambaSpec.max_memory_usage_bytes = one page, v0.11.0):
    # cdiv(32,768, 544) = 61 + 3 = 64 blocks per request → 1,606 / 64 = 25.09.
    got = vllm_capacity_pass(
        dataclasses.replace(  # on 141 GiB GPUs: its 74.4 GiB of bf16 weights per GPU + 10 GiB do not fit in 80
            _run(
                QWEN3_NEXT,
                engine_version="0.11.0",
                tensor_parallel_size=2,
                max_model_len=32768,
                kv_cache_memory_bytes=10 * GIB,
            ),
            gpu_memory_bytes=141 * GIB,
        )
    )
    assert got.block_size == 544
    assert got.kv_cache_tokens == 218_144
    assert got.max_concurrency == 1606 / 64


def test_qwen3_6_on_vllm_0_24_prints_concurrency_times_max_model_len() -> None:
    # tests/capacity/truth/vllm_v1.yaml qwen3.6-35b-a3b-nvfp4-rtx5090-v0240 (vLLM 0.24.0, fp8 KV, --max-model-len
    # 131072, --enable-prefix-caching): "Available KV cache memory: 5.98 GiB", "GPU KV cache size: 567,978 tokens",
    # "Maximum concurrency for 131,072 tokens per request: 4.33x".
    # Qwen3.6-35B-A3B: 40 layers = 10 full + 30 GDN; 2 KV heads × 256, fp8: 1,024 B per token per layer; state
    # 3 × 8,192 × 2 B + 32 × 128 × 128 × 4 B = 2,146,304 B (Qwen3_5MoeForConditionalGeneration, mamba_ssm_dtype
    # float32). Block 16 × cdiv(2,146,304, 16,384) = 16 × 131 = 2,096 (page 2,146,304 B, no padding); 4 groups of 10:
    # pool block 21,463,040 B; int(5.98 GiB) // 21,463,040 = 299 blocks. 'align' mode: cdiv(131,072, 2,096) = 63 +
    # 3 × 2 = 69 per request: 299 / 69 = 4.333; get_kv_cache_capacity: int(299 / 69 × 131,072) = 567,978.
    # (The NVFP4 weights do not enter: the pool is given.)
    got = vllm_capacity_pass(
        _run(
            QWEN36_35B,
            engine_version="0.24.0",
            max_model_len=131072,
            kv_cache_dtype="fp8",
            enable_prefix_caching=True,
            kv_cache_memory_bytes=int(5.98 * GIB),
        )
    )
    assert got.kv_cache_tokens == 567_978  # engine
    assert round(got.max_concurrency, 2) == 4.33  # engine
    # without prefix caching ('none' mode: one state page per group): 63 + 3 = 66 → int(299 / 66 × 131,072)
    off = vllm_capacity_pass(
        _run(
            QWEN36_35B,
            engine_version="0.24.0",
            max_model_len=131072,
            kv_cache_dtype="fp8",
            enable_prefix_caching=False,
            kv_cache_memory_bytes=int(5.98 * GIB),
        )
    )
    assert off.kv_cache_tokens == 299 * 131072 // 66


def test_qwen3_5_27b_prefix_caching_is_off_by_default_before_0_26_and_on_from_it() -> None:
    # vllm-project/vllm#40691 (vLLM 0.19.0, `vllm serve Qwen3.5-27B --max-model-len 32768`, bf16, no prefix-caching
    # flag): "GPU KV cache size: 290,864 tokens", "Maximum concurrency for 32,768 tokens per request: 33.04x".
    # Qwen3.5-27B: 64 layers = 16 full + 48 GDN; 4 KV heads × 256 bf16 = 4,096 B per token per layer; state
    # 3 × 10,240 × 2 B + 48 × 128 × 128 × 4 B = 61,440 + 3,145,728 = 3,207,168 B; block 16 × cdiv(3,207,168,
    # 65,536) = 16 × 49 = 784; 4 groups of 16. Prefix caching off for hybrids (ModelConfig.is_prefix_caching_
    # supported, 0.19-0.25) → 'none': cdiv(32,768, 784) = 42 + 3 × 1 = 45 blocks per request. 290,864 = 371 × 784
    # → num_blocks // 4 = 371, and 33.04 × 45 = 1,486.8 → num_blocks = 1,487 (1,487 / 45 = 33.044).
    # 1,487 blocks × 16 pages × 3,211,264 B = 71.15 GiB beside ~51 GiB of weights: the board holds more than 80 GiB
    # (the truth table's row: likely the 141 GB H20), so the pass runs on 141 GiB — an override the GPU cannot hold
    # is refused (breaker 31)
    big = {"gpu_memory_bytes": 141 * GIB}
    at_019 = vllm_capacity_pass(
        _run(QWEN35_27B, engine_version="0.19.0", max_model_len=32768, num_gpu_blocks_override=1487, **big)
    )
    assert at_019.kv_cache_tokens == 290_864  # engine
    assert round(at_019.max_concurrency, 2) == 33.04  # engine
    # v0.26.0: "Generative hybrid models support prefix caching" → on by default → 'align': 42 + 3 × 2 = 48 blocks per
    # request; tokens int(1,487 / 48 × 32,768) = int(1,015,125.3) = 1,015,125.
    at_026 = vllm_capacity_pass(
        _run(QWEN35_27B, engine_version="0.26.0", max_model_len=32768, num_gpu_blocks_override=1487, **big)
    )
    assert at_026.max_concurrency == 1487 / 48
    assert at_026.kv_cache_tokens == 1_015_125


def test_from_vllm_0_20_the_block_is_aligned_to_a_larger_block_size() -> None:
    # --block-size 64 on Qwen3.5-9B fp8 (state 2,146,304 B, 2,048 B per token per layer):
    # 0.18.0 HybridAttentionMambaModelConfig: alignment 16 → 1,056 tokens, above 64, so 1,056.
    # 0.20.0 Platform._align_hybrid_block_size: alignment max(16, block_size 64) = 64 → 64 × cdiv(2,146,304,
    # 64 × 2,048) = 64 × 17 = 1,088 tokens.
    kw: dict[str, object] = {"max_model_len": 65536, "kv_cache_dtype": "fp8", "block_size": 64}
    kw["kv_cache_memory_bytes"] = 20 * GIB
    assert vllm_capacity_pass(_run(QWEN35_9B, engine_version="0.18.0", **kw)).block_size == 1056
    assert vllm_capacity_pass(_run(QWEN35_9B, engine_version="0.20.0", **kw)).block_size == 1088


def test_gemma3_sliding_hybrid_prints_concurrency_times_max_model_len_from_vllm_0_21() -> None:
    # vllm/v1/core/kv_cache_utils.py _report_kv_cache_config, v0.21.0 (line 1708): num_tokens =
    # int(max_concurrency * max_model_len); v0.20.0: num_blocks // len(kv_cache_groups) * min_block_size.
    # Gemma-3-1B's eole log pool (test_vllm_hybrid_kv.py: 416,008 blocks of 4 layer pages, 7 groups, 902 blocks per
    # 2,048-token request): 0.20 → 416,008 // 7 × 16 = 950,864; 0.21 → int(416,008 / 902 × 2,048) = 944,550.
    gemma = ModelArch.from_hf_config(GEMMA3_1B, "google/gemma-3-1b-it")
    pool = 416_008 * 4 * 2 * 16 * 1 * 256 * 2
    kw: dict[str, object] = {"max_model_len": 2048, "max_num_batched_tokens": 8192, "kv_cache_memory_bytes": pool}
    assert vllm_capacity_pass(_run(gemma, engine_version="0.20.0", **kw)).kv_cache_tokens == 950_864
    assert vllm_capacity_pass(_run(gemma, engine_version="0.21.0", **kw)).kv_cache_tokens == 944_550


def test_a_short_request_holds_its_state_pages_too_so_the_ceiling_at_its_length_counts_them() -> None:
    # vLLM V1 admits a request into the one pool of blocks: its attention pages plus its state pages in every
    # recurrent group (get_max_concurrency_for_kv_cache_config sums the groups). Qwen3.5-9B on 0.18 with prefix
    # caching ('align': 2 pages in each of 3 state groups): a 1,000-token request holds 1 + 6 = 7 of the 1,258
    # blocks, so 179 fit, not the 314 that kv_cache_blocks (1,258 // 4 groups) ÷ 1 block gave before.
    got = vllm_capacity_pass(
        _run(
            QWEN35_9B,
            engine_version="0.18.0",
            max_model_len=65536,
            kv_cache_dtype="fp8",
            enable_prefix_caching=True,
            num_gpu_blocks_override=1258,
        )
    )
    assert got.concurrency_at(1000) == pytest.approx(1258 / 7)
    assert got.concurrency_at(65536) == pytest.approx(got.max_concurrency)  # the engine's printed 18.23
