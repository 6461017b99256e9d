"""Issue 16, kind G: sliding-window models under vLLM's own KV layout, by engine generation.

Expected figures come from published vLLM start-up logs (cited per test) and from hand arithmetic on the engine's
source, written out here; none from running our code. Gemma-3-1B (``google/gemma-3-1b-it``, config.json at
huggingface.co/google/gemma-3-1b-it, the ``GEMMA3_1B`` keys in ``test_models.py``; also mlx-community's
gemma-3-1b-it: 26 layers, sliding_window 512, sliding_window_pattern 6, 1 KV head of 256): 22 sliding and 4 full
layers (layers 5, 11, 17, 23), one layer page of 16 tokens = 2 × 16 × 1 × 256 × 2 B = 16,384 B.
"""

from __future__ import annotations

import pytest

from advisor.capacity.kv import CapacityInputs, vllm_capacity_pass
from advisor.capacity.models import ModelArch
from tests.capacity.test_models import GEMMA3_1B

GIB = 1 << 30
LAYER_PAGE = 2 * 16 * 1 * 256 * 2  # bytes: one layer's 16-token block of Gemma-3-1B, bf16
GEMMA = ModelArch.from_hf_config(GEMMA3_1B, "google/gemma-3-1b-it")


def _gemma(**kw: object) -> CapacityInputs:
    return CapacityInputs(model=GEMMA, gpu_memory_bytes=32 * GIB, **kw)  # type: ignore[arg-type]


def test_gemma3_1b_on_vllm_0_13_pads_the_sliding_groups_and_counts_the_batch_in_the_window() -> None:
    # github.com/eole-nlp/eole benchmarks/genai/results.md, "vLLM with compilation_config": V1 LLM engine
    # (v0.13.0), google/gemma-3-1b-it, max_model_len 2048, "Chunked prefill is enabled with
    # max_num_batched_tokens=8192", then:
    #   Available KV cache memory: 25.39 GiB
    #   Add 2 padding layers, may waste at most 9.09% KV cache memory
    #   GPU KV cache size: 950,864 tokens
    #   Maximum concurrency for 2,048 tokens per request: 461.21x
    # vllm/v1/core/kv_cache_utils.py (v0.13.0): group size min(22, 4) = 4 layers; 22 sliding → 6 groups (2
    # padding layers, 2/22 = 9.09 %), 4 full → 1 group: 7 groups. A pool block is 4 layer pages = 65,536 B.
    # num_blocks = pool // 65,536; tokens = num_blocks // 7 × 16; per request (get_max_concurrency_for_kv_cache_
    # config): full cdiv(2048, 16) = 128, sliding cdiv(min(511 + 8192, 2048), 16) + 1 = 129 → 128 + 6 × 129 = 902.
    # 950,864 tokens → num_blocks // 7 = 59,429; 461.21 → num_blocks / 902 in [461.205, 461.215): num_blocks =
    # 416,007…416,009, i.e. 27.26 GB = 25.39 GiB, as printed. Take 416,008 blocks:
    blocks = 416_008
    got = vllm_capacity_pass(
        _gemma(
            max_model_len=2048,
            max_num_batched_tokens=8192,
            kv_cache_memory_bytes=blocks * 4 * LAYER_PAGE,
            engine_version="0.13.0",
        )
    )
    assert got.kv_cache_tokens == 950_864  # engine; was 1,024,016 (26 layers, no padding: +7.7 %)
    assert round(got.max_concurrency, 2) == 461.21  # engine
    # The figure the issue quotes, 1,344, is the old per-layer window rule on this pool (a sliding layer capped at
    # ceil(512 / 16) + 1 = 33 blocks, no batch term): 416,008 × 65,536 ÷ (16,384 × (4 × 128 + 22 × 33)) = 1,344.1;
    # the engine prints 461.21, so the "1,344 instead of 461" has the two figures the other way round.
    assert got.max_concurrency != pytest.approx(blocks * 4 * LAYER_PAGE / (LAYER_PAGE * (4 * 128 + 22 * 33)))


def test_gemma3_1b_on_vllm_0_10_at_its_default_batch_of_2048_on_a_small_gpu() -> None:
    # github.com/gbrayut/cloud-examples gke-ai-misc/README.md ("Troubleshooting"), deployment vllm-3-1b-it.yaml:
    # image vllm/vllm-openai:v0.10.1.1, google/gemma-3-1b-it on an A100 MIG 1g.5gb slice, defaults (max_model_len
    # 32,768; max_num_batched_tokens 2,048, V1's API-server default below 70 GiB):
    #   Available KV cache memory: 1.40 GiB
    #   Add 2 padding layers, may waste at most 9.09% KV cache memory
    #   GPU KV cache size: 52,608 tokens
    #   Maximum concurrency for 32,768 tokens per request: 7.64x
    # 52,608 / 16 = 3,288 = num_blocks // 7 → num_blocks 23,016…23,022; per request cdiv(32,768, 16) = 2,048 full +
    # 6 × (cdiv(min(511 + 2,048, 32,768), 16) + 1 = 161) = 3,014 blocks: 23,016 / 3,014 = 7.636 → "7.64x";
    # 23,016 × 65,536 B = 1.4048 GiB → "1.40 GiB".
    got = vllm_capacity_pass(
        CapacityInputs(
            model=GEMMA,
            gpu_memory_bytes=int(4.75 * GIB),
            kv_cache_memory_bytes=23_016 * 4 * LAYER_PAGE,
            engine_version="0.10.1.1",
        )
    )
    assert got.kv_cache_tokens == 52_608
    assert round(got.max_concurrency, 2) == 7.64


@pytest.mark.parametrize(
    "settings",
    [{"engine_version": "0.9.0"}, {"engine_version": "0.10.2", "disable_hybrid_kv_cache_manager": True}],
    ids=["v1 0.9.0", "hybrid manager off"],
)
def test_before_the_hybrid_manager_or_with_it_off_every_window_is_full_attention(settings: dict[str, object]) -> None:
    # vllm/v1/core/kv_cache_utils.py v0.9.0 get_kv_cache_config: unify_hybrid_kv_cache_specs turns every
    # SlidingWindowSpec into FullAttentionSpec (v0.9.1+: only under --disable-hybrid-kv-cache-manager), then
    # _get_kv_cache_config_uniform_type: num_blocks = pool // 16,384 // 26 layers; concurrency = tokens / L.
    # Pool 1 GiB: 1,073,741,824 // 16,384 // 26 = 2,520 blocks = 40,320 tokens; 40,320 / 2,048 = 19.69.
    got = vllm_capacity_pass(_gemma(max_model_len=2048, kv_cache_memory_bytes=GIB, **settings))  # type: ignore[arg-type]
    assert got.kv_cache_tokens == 40_320
    assert got.max_concurrency == pytest.approx(19.6875)  # was 43.2 (a per-layer window the engine does not keep)


def test_v0_keeps_an_interleaved_window_at_full_length() -> None:
    # vllm/config.py ModelConfig.__init__ (0.8.5; 0.7.3 for gemma2/cohere2): a gemma3_text model has "interleaved
    # attention": its sliding_window is deleted and "the scheduler and the model treat it as full attention", so
    # the V0 block manager reserves cdiv(2,048, 16) = 128 blocks of all 26 layers per request:
    # 2,520 blocks (1 GiB, as above) / 128 = 19.69.
    got = vllm_capacity_pass(
        _gemma(max_model_len=2048, kv_cache_memory_bytes=GIB, engine_version="0.8.5", overhead_profile="vllm-v0")
    )
    assert got.kv_cache_tokens == 40_320
    assert got.max_concurrency == pytest.approx(2520 / 128)


def test_v0_caps_an_all_sliding_model_by_its_block_manager_rule() -> None:
    # Mistral-7B-v0.1 (every layer windowed at 4,096). vllm/core/block_manager.py (0.7.3)
    # SelfAttnBlockSpaceManager.__init__: max_block_sliding_window = 4,096 // 16 + 1 + 1 = 258 blocks per sequence,
    # the cap can_allocate applies. Pool 10 GiB over 32 layers × 8 KV heads × 128 × 2 × 2 B = 131,072 B/token:
    # 10 GiB // (16 × 131,072) = 5,120 blocks; at 32,768 tokens min(2,048, 258) = 258 → 19.845.
    from advisor.capacity.models import get_preset

    mistral = get_preset("mistralai/Mistral-7B-v0.1")
    got = vllm_capacity_pass(
        CapacityInputs(
            model=mistral,
            gpu_memory_bytes=40 * GIB,
            max_model_len=32768,
            kv_cache_memory_bytes=10 * GIB,
            engine_version="0.7.3",
            overhead_profile="vllm-v0",
        )
    )
    assert got.kv_cache_blocks == 5120
    assert got.max_concurrency == pytest.approx(5120 / 258)  # was 5120 / 257 (ceil(4096 / 16) + 1)


def test_v1_counts_an_all_sliding_model_as_one_sliding_group() -> None:
    # vllm/v1/core/kv_cache_utils.py v0.10.2 _get_kv_cache_config_uniform_type + kv_cache_interface.py
    # SlidingWindowSpec.max_memory_usage_bytes: one group of all 32 layers; per request cdiv(min(4,095 + 8,192,
    # 32,768) = 12,287, 16) + 1 = 768 + 1 = 769 blocks; 5,120 blocks (as above) / 769 = 6.658.
    from advisor.capacity.models import get_preset

    got = vllm_capacity_pass(
        CapacityInputs(
            model=get_preset("mistralai/Mistral-7B-v0.1"),
            gpu_memory_bytes=80 * GIB,
            max_model_len=32768,
            max_num_batched_tokens=8192,
            kv_cache_memory_bytes=10 * GIB,
            engine_version="0.10.2",
        )
    )
    assert got.kv_cache_tokens == 5120 * 16  # unchanged: one group, every layer
    assert got.max_concurrency == pytest.approx(5120 / 769)  # was 5120 / 257


@pytest.mark.parametrize(("version", "tokens"), [("0.20.0", 950_864), ("0.21.0", 944_550)])
def test_from_vllm_0_21_the_hybrid_token_count_is_concurrency_times_max_model_len(version: str, tokens: int) -> None:
    # vllm/v1/core/kv_cache_utils.py _report_kv_cache_config: v0.20.0 (line 1694) prints num_blocks // len(groups)
    # × min block_size; v0.21.0 (line 1708) prints int(max_concurrency × max_model_len). The 0.13 pool above
    # (416,008 blocks, 7 groups, 902 blocks a request at 2,048 tokens): 0.20 → 416,008 // 7 × 16 = 950,864;
    # 0.21 → int(416,008 / 902 × 2,048) = int(944,550.3) = 944,550. The pass reports whole blocks, so within 16.
    got = vllm_capacity_pass(
        _gemma(
            max_model_len=2048,
            max_num_batched_tokens=8192,
            kv_cache_memory_bytes=416_008 * 4 * LAYER_PAGE,
            engine_version=version,
        )
    )
    assert abs(got.kv_cache_tokens - tokens) < 16
    assert round(got.max_concurrency, 2) == 461.21
