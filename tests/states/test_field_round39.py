"""Field states, round 39: vLLM 0.2x pages of 2026 where the KV pool's size is the engine's, not the advisor's — a
Gemma-4 pool that vLLM 0.21 sizes ten times larger than 0.20 did on the same memory, and a hybrid 27B at 262,144
tokens of context on one Blackwell card whose fp8 pool is worth more than the nvfp4 one that would hold 67 % more —
from two public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1, the 0.33 label set for 2026 releases, as
rounds 14 and 33 render 0.2x), with the speculative-decoding counters of ``vllm/v1/spec_decode/metrics.py``
(:func:`tests.states.test_field_round3_vllm._spec_decode_lines`) where the drafter runs. The assertions come from the
reports' numbers, the verdict each thread establishes and engine facts, never from the advisor's output:

* ``vllm-0.21-gemma4-31b-awq-a100-swa-pool-525k-agents-no-advice`` — Gemma-4-31B (AWQ 4-bit) on one A100 80GB at
  ``--gpu-memory-utilization 0.9``: vLLM 0.20.0 sized the pool at ~55k tokens, 0.21.0 at ~525k tokens from the same
  ~50 GB ("the efficiency gain is per token"): 0.21 accounts the sliding-window layers (1,024 tokens) and the shared
  KV layers as they are. The engine's 525k is the pool. Sixteen agent chats of ~20k tokens run with nothing waiting
  and no preemption: no advice — never a pool turn, never a context cap, never replicas, never a restart.
* ``vllm-0.28-qwen38-27b-rtx-pro-6000-fp8-kv-262k-one-stream-no-advice`` — Qwen3.8-27B (MTP, NVFP4) on one RTX PRO
  6000 Blackwell at ``--max-model-len 262144 --max-num-seqs 8 --kv-cache-dtype fp8``, MTP k=3: the fp8 pool holds
  1,750,067 tokens (6.68 × 262,144) and decodes one stream at a median 135.0 tokens/s; the nvfp4 KV cache holds
  2,917,565 (+66.7 %) and decodes at 114.4 (−15 %). One long stream runs on a pool ~7 % used: no advice — never a
  KV-dtype turn (a smaller cache would cost the one stream 15 % and buy room nothing needs), never speculation
  off, never replicas or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, _spec_decode_lines, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round14 import QWEN35_27B_CONFIG

# --- 1. vLLM 0.21: Gemma-4-31B AWQ on an A100 80GB, a 525k-token pool from the memory 0.20 gave 55k ------------------


def vllm_gemma4_swa_pool_525k_agents() -> FieldState:
    """vllm-project/vllm#43308 ("[Performance]: Massive increase (~10x) in KV Cache capacity for Gemma 4 in v0.21.0",
    closed, May 2026): "While testing Gemma 4 (specifically using cyankiwi/gemma-4-31B-it-AWQ-4bit) on an A100 80GB,
    I observed a massive increase in available KV cache capacity between vLLM v0.20.0 and v0.21.0. … Using the same
    args and ``--gpu-memory-utilization 0.9``: v0.20.0 | ~55k tokens | High; v0.21.0 | ~525k tokens | Low (~9.5x
    reduction). Total available KV cache memory remained constant (~50 GB), indicating the efficiency gain is per
    token"; "Gemma 4 utilizes … Alternating Attention: Mix of local sliding-window layers (1024 tokens) and global
    full-context layers. Shared KV Cache: The last N layers reuse KV states from earlier layers … in v0.20.0, the
    memory profiler may have been treating all layers as global and non-shared, leading to massive over-allocation.
    In v0.21.0, vLLM seems to correctly recognize the sliding-window budget".

    Engine facts: the 0.33 ``cache_config_info`` carries ``kv_cache_size_tokens``, "Per-DP-engine KV cache capacity in
    tokens (group-aware). Uses group-aware capacity since num_gpu_blocks * block_size can be wrong for hybrid
    models"; ``kv_cache_usage_perc`` is the share of blocks held. So the pool is what the engine reports (≈ 525k
    tokens), not an all-layers-global estimate of the same memory (≈ 55k). Arithmetic: sixteen agent chats of ~20,000
    tokens hold 320,000 tokens of context, 61 % of 525k (and 5.8 × an all-global 55k pool, which could not hold them
    at all — the engine is running them): nothing waits, nothing is preempted, tokens flow at 30 ms. So: no advice at
    all — never a pool turn (fp8 KV, a larger memory fraction, a KV budget, weight quantization: the pool is not
    short), never a context cap (16 run whole), never replicas (one second), never a restart; no stall claimed.

    Chosen where the report is silent, and the stand-ins: Gemma-4-31B is not in the advisor's tables; Gemma-3-27B
    (the nearest Gemma preset, likewise a sliding-window hybrid; round 17's stand-in) in ``awq`` stands in on one
    A100 80GB at 0.9 with its own 131,072-token context; the pool is the report's (32,812 blocks of 16, 524,992
    tokens). The workload (sixteen agent chats of ~20,000-token prompts, ~500 tokens out at 30 ms, TTFT ~2 s, 70 %
    prefix hits; 400 turns answered before). vLLM 0.21.0 with the 0.33 label set. SLO: TTFT 5 s, TPOT 0.1 s (the
    report states none).
    """
    served = "cyankiwi/gemma-4-31B-it-AWQ-4bit"
    blocks = 32_812
    pool = blocks * 16
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 6 * 3_600.0,
    )
    eng.cache_labels["sliding_window"] = "1024"
    eng.finish(400, prompt=20_000, output=500, ttft=2.0, tpot=0.03, queue=0.02, max_tokens=4_096)
    eng.first_tokens([2.0] * 400)
    eng.prefill(400 * 20_000, cached=400 * 14_000)
    eng.decode(400 * 499, 0.03, steps=400 * 499 / 16, batch=16)
    eng.running, eng.waiting, eng.kv_usage = 16.0, 0.0, 16 * 20_000 / pool
    first = eng.render()
    # the window: sixteen streams decode 33 tokens each; one finishes, one is admitted with a prefix hit
    eng.decode(16 * 33, 0.03, steps=33, batch=16)
    eng.finish(1, prompt=20_000, output=500, ttft=2.0, tpot=0.03, queue=0.02, max_tokens=4_096)
    eng.first_tokens([1.9])
    eng.prefill(20_500, cached=14_350)
    eng.kv_usage = (16 * 20_000 + 16 * 33) / pool
    return FieldState(
        id="vllm-0.21-gemma4-31b-awq-a100-swa-pool-525k-agents-no-advice",
        source="https://github.com/vllm-project/vllm/issues/43308",
        engine_version="vLLM 0.21.0, Gemma-4 sliding-window + shared-KV pool (0.33 label set)",
        deployment={
            "name": "gemma4-31b-awq-a100",
            "engine": "vllm",
            "engine_version": "0.21.0",
            "model": "google/gemma-3-27b-it",
            "served_model": served,
            "gpu": "a100-80gb",
            "quantization": "awq",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131_072,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 16, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        must_never=[*POOL_TURNS, ("max_model_len", "decrease"), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 2. vLLM 0.28: one 262k-context stream on an fp8 pool of 1.75M tokens; nvfp4 KV would cost it 15 % -------------


def _hybrid_labels(eng: VLLMEngine, *, pool_tokens: int, cache_dtype: str) -> None:
    """``cache_config_info`` of a hybrid GDN model with prefix caching on (Mamba ``align`` mode, the Mamba block the
    attention block): the group-aware pool in tokens and the concurrency at ``max_model_len`` (as round 33)."""
    eng.cache_labels.update(
        kv_cache_size_tokens=str(pool_tokens),
        kv_cache_max_concurrency=str(round(pool_tokens / eng.max_model_len, 4)),
        cache_dtype=cache_dtype,
        enable_prefix_caching="True",
        mamba_cache_mode="align",
        mamba_block_size=str(eng.block_size),
    )


def vllm_fp8_kv_262k_one_stream_nvfp4_not_worth() -> FieldState:
    """vllm-project/vllm#46329 ("[Attention][Quantization] NVFP4 KV cache on consumer/SoC Blackwell (sm120/sm121) for
    Gemma 3/4 via FlashInfer FA2", open), a re-test in September 2026: "RTX PRO 6000 Blackwell Workstation (sm_120, 96
    GiB) … TP=1, ``sakamakismile/Qwen3.8-27B-MTP-NVFP4``, ``--max-model-len 262144 --max-num-seqs 8
    --gpu-memory-utilization 0.90``, MTP k=3, prefix caching and chunked prefill on, CUDA graphs on. Control arm is
    stock ``vllm/vllm-openai:nightly`` with ``--kv-cache-dtype fp8``": "GPU KV cache size | 2,917,565 tokens [nvfp4] |
    1,750,067 tokens [fp8]; Max concurrency @ 262,144 | 11.13x | 6.68x; attention block size | 2848 | 1600; needle,
    3 contexts x 4 depths to ~257k | 12/12 | 12/12; single-stream decode … median | 114.4 | 135.0" — "+66.7% KV pool
    for −15% median single-stream decode".

    Engine facts: the control arm's page — a hybrid GDN pool in tokens (``kv_cache_size_tokens`` 1,750,067, the
    attention block 1,600), ``cache_dtype`` fp8, the MTP drafter's counters. Arithmetic: one stream of ~120,000 tokens
    holds ~7 % of the pool (the pool holds 6.68 full-length requests and ``max_num_seqs`` is 8); it decodes at 135
    tokens/s (7.4 ms a token) with ~2.5 tokens a round from MTP k=3. The nvfp4 cache would hold 2.9M tokens nothing
    asks for and cost this stream 15 % of its speed; the fp8 arm is the report's better choice for this load. So: no
    advice at all — never a KV-dtype turn, never a larger memory fraction or KV budget or weight quantization (the
    pool is 7 % used), never speculation off or down (it runs one stream, where a drafter pays most), never more
    sequences, replicas (one second) or a restart; no stall claimed.

    Chosen where the report is silent, and the stand-ins: Qwen3.8-27B is not in the advisor's tables; Qwen3.5-27B's
    published ``config.json`` (the same 16-of-64 full-attention GDN layout; rounds 14 and 33's stand-in) in a 4-bit
    checkpoint (``gptq``, as round 33 stands in for a 4-bit 27B) with an fp8 KV cache; the pool is the report's
    (1,094 blocks of 1,600, 1,750,067 tokens). MTP acceptance (the report gives none): ~1.5 of 3 drafts accepted a
    round (0.80, 0.48, 0.22 by position). History: 30 long-document turns (~120,000-token prompts, 1,500 out, TTFT
    ~40 s, half the prompt from the prefix cache). The window: one stream decodes 135 tokens. vLLM nightly of
    September 2026 (0.28.1rc1) with the 0.33 label set. SLO: TTFT 60 s, TPOT 0.05 s (a long-context reader; the
    report states none).
    """
    served = "sakamakismile/Qwen3.8-27B-MTP-NVFP4"
    blocks, block, pool = 1_094, 1_600, 1_750_067
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=262_144,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 4 * 3_600.0,
    )
    _hybrid_labels(eng, pool_tokens=pool, cache_dtype="fp8")
    eng.finish(30, prompt=120_000, output=1_500, ttft=40.0, tpot=0.0074, queue=0.01, max_tokens=8_192)
    eng.first_tokens([40.0] * 30)
    eng.prefill(30 * 120_000, cached=30 * 60_000)
    rounds = 30 * 1_499 / 2.5
    eng.decode(30 * 1_499, 0.0074, steps=rounds, batch=4)
    accepted = [0.80 * rounds, 0.48 * rounds, 0.22 * rounds]
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 76 / blocks
    first = eng.render() + _spec_decode_lines(eng, rounds, 3 * rounds, accepted)
    # the window: one stream decodes 135 tokens in 54 rounds of MTP k=3
    eng.decode(135, 0.0074, steps=54, batch=4)
    rounds += 54
    accepted = [a + 54 * p for a, p in zip(accepted, (0.80, 0.48, 0.22), strict=True)]
    second = eng.render() + _spec_decode_lines(eng, rounds, 3 * rounds, accepted)
    return FieldState(
        id="vllm-0.28-qwen38-27b-rtx-pro-6000-fp8-kv-262k-one-stream-no-advice",
        source="https://github.com/vllm-project/vllm/pull/46329",
        engine_version="vLLM nightly 0.28.1rc1 (Sept 2026), hybrid GDN, fp8 KV, MTP k=3 (0.33 label set)",
        deployment={
            "name": "qwen38-27b-rtx-pro-6000-262k",
            "engine": "vllm",
            "engine_version": "0.28.1",
            "model": QWEN35_27B_CONFIG,
            "served_model": served,
            "gpu": "rtx-pro-6000-blackwell",
            "quantization": "gptq",
            "kv_cache_dtype": "fp8",
            "language_model_only": True,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 262_144,
            "max_num_seqs": 8,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        must_never=[
            *POOL_TURNS,
            ("speculative_decoding", "disable"),
            ("speculative_decoding", "decrease"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_gemma4_swa_pool_525k_agents(),
    vllm_fp8_kv_262k_one_stream_nvfp4_not_worth(),
]

XFAIL: dict[str, str] = {}
"""No state is marked: a failing state is a finding of this round (see the report)."""

once, test_field_state = round_tests(STATES, XFAIL)
