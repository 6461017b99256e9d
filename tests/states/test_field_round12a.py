"""Field states, round 12a: vLLM V1 and SGLang, from three public reports.

Each row is built from one operator's public report (``source``): the deployment as the report states it (where it
does not, or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and
two scrapes one second apart rendered by :class:`tests.states.VLLMEngine` (the V1 families of
``vllm/v1/metrics/loggers.py``, 0.33 label set) and :class:`tests.states.SGLangEngine` (SGLang 0.5.x scheduler and
tokenizer families).

This round looks for states where a wrong turn is tempting because a gauge points the wrong way: a cold prefill on
every request of a hybrid sliding-window model whose pool is 86 % free, a fleet pod whose pool is full because the
engine's default memory fraction left 8 % of each card unused, and a benchmark sized to 97 % of the pool that
preempts as its requests decode. The assertions are written from the reports' numbers, the fix or the verdict the thread
establishes and engine facts, never from the advisor's output:

* ``vllm-gemma4-swa-prefix-reuse-collapse-pool-14pct`` — two ~21,000-token sessions alternating on a hybrid-SWA
  model: prefix reuse is exactly zero, every turn re-prefills cold (~7.5 s), while the pool is 14 % used. The fix
  is a prefix-cache retention setting (not a pool, replica or restart turn); it works on a smaller pool.
* ``sglang-qwen3-32b-tp2-default-mem-fraction-early-saturation`` — one of eight TP-2 pods at SGLang's default
  ``--mem-fraction-static`` (~0.82) saturates its pool and queues; the fix merged is 0.90 (above 0.92 the pods
  OOM). Propose a larger memory fraction, at most 0.92.
* ``vllm-0.18-qwen35-9b-18x80k-sized-to-pool-preempts`` — 18 concurrent 80,000-token requests sized to 97 % of the
  pool: the pool fills during decode and the newest request is preempted and re-prefilled. Working as intended (the
  answer): fewer sequences (≤ 17) or a larger pool; never more sequences or a bigger step, never a restart.

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every such row says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from typing import Any

from tests.states import SGLangEngine, VLLMEngine
from tests.states.field import FieldState, brief, matching, number, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests

# --- 1. vLLM: hybrid-SWA prefix reuse collapses to zero across two sessions, pool 14 % used -----------------------


def vllm_gemma4_swa_prefix_reuse_collapse() -> FieldState:
    """vllm-project/vllm#48435 ("[Bug/Perf]: hybrid-SWA prefix caching collapses to zero for ALL requests in
    multi-session round-robin at ~25% pool occupancy (Gemma-4-31B; eager-freed SWA tails recycled tail-first)",
    closed): "For hybrid-SWA models (tested: Gemma-4-31B, 10 full-attention / 50 sliding-window(1024) layers),
    cross-request prefix-cache reuse collapses to exactly zero for every request in a multi-session round-robin
    workload once the combined working set exceeds a sharp threshold far below pool capacity (~34–38k tokens vs a
    153k-token pool — ~25% occupancy). Reuse is total-or-nothing, never partial. Reproduced on v0.24.0 and v0.25.0";
    "a full-attention-only workload pattern (single session re-fired) gets 99.96% hits at 64k"; the deployment:
    "1× RTX 5090 32GB … ``vllm serve google/gemma-4-31B-it-qat-w4a16-ct … --kv-cache-dtype fp8 --max-model-len 65536
    --max-num-seqs 8 --gpu-memory-utilization 0.93``; Log: ``GPU KV cache size: 153,374 tokens``". The resolution,
    from the reporter: "The fix already exists; it was off by default when I filed this. #43447 … added selective
    prefix-cache retention for sliding-window groups, controlled by ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` … leaving
    the variable unset selects ``None``, which preserves the old dense behavior" (#52216 makes it
    ``--prefix-cache-retention-interval``, default 0); the re-test on v0.28.0 ran "same model and flags … advertised
    pool 114,842 tokens", where "Cold is ~7.5 s per 21k seat and ~28 s for the 64k seat" and the warm rounds hit.

    Arithmetic: two seats of ~21,000 tokens are a ~42,000-token working set, past the 34–38k threshold: every turn
    re-prefills its whole prompt (hits 0 of ~21,000; TTFT ~7.5 s, ~2,800 prompt tokens/s) while one request holds
    ~21,000 of 153,374 tokens (14 %). What fixes it is the retention setting — a flag the advisor does not turn — and
    it fixed it on a 25 % *smaller* pool (114,842 tokens): the pool's size is not what loses the prefixes. So: never
    a turn that grows the pool (KV dtype — already fp8 —, a higher memory fraction, a KV byte budget, weight
    quantization — already 4-bit); never turn prefix caching off (the fix keeps it on, and single-session re-fires hit
    99.96 %); never replicas (one second of history; one request at a time, nothing waits); never a restart (it
    serves: prompt tokens move); never a context cap below the 64k seat. Nothing is required.

    Chosen: Gemma-4-31B and the RTX 5090's pairing are not in the advisor's tables; google/gemma-3-27b-it (the same
    family's hybrid: sliding-window 1,024 layers interleaved 5:1 with global ones) in AWQ stands in on the RTX 5090,
    with the report's pool rendered (9,586 blocks of 16 = 153,376 tokens), ``cache_config_info`` marking the sliding
    window (``sliding_window`` 1024) and ``cache_dtype`` fp8. The seats alternate one at a time (running 1, waiting
    0); outputs ~300 tokens at ~30 ms. Before: 40 turns served, all cold (hits 0). The window: one seat's prompt
    being prefilled, ~2,800 tokens scheduled, none cached. vLLM 0.25.0 rendered with the 0.33 label set. SLO: TTFT
    5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="google/gemma-4-31B-it-qat-w4a16-ct",
        num_gpu_blocks=9_586,
        max_model_len=65_536,
        gpu_memory_utilization=0.93,
        version="0.33",
    )
    eng.cache_labels.update(sliding_window="1024", cache_dtype="fp8")
    eng.finish(40, prompt=21_000, output=300, ttft=7.5, tpot=0.03, queue=0.05)
    eng.first_tokens([7.5] * 40)
    eng.prefill(40 * 21_000 + 8_400, cached=0)
    eng.decode(40 * 300, 0.03)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.06
    first = eng.render()
    eng.prefill(2_800, cached=0)
    eng.hists["vllm:iteration_tokens_total"].observe(2_048, 1)
    eng.hists["vllm:iteration_tokens_total"].observe(752, 1)
    eng.kv_usage = 0.073
    return FieldState(
        id="vllm-gemma4-swa-prefix-reuse-collapse-pool-14pct",
        source="https://github.com/vllm-project/vllm/issues/48435",
        engine_version="vLLM 0.25.0 (rendered with the 0.33 label set)",
        deployment={
            "name": "gemma4-31b-5090-seats",
            "engine": "vllm",
            "engine_version": "0.25.0",
            "model": "google/gemma-3-27b-it",
            "served_model": "google/gemma-4-31B-it-qat-w4a16-ct",
            "gpu": "rtx5090",
            "quantization": "awq",
            "kv_cache_dtype": "fp8",
            "gpu_memory_utilization": 0.93,
            "max_model_len": 65_536,
            "max_num_seqs": 8,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 153_376},
        must_never=[
            *POOL_TURNS,
            ("prefix_caching", "disable"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(64_000), no_stall_claimed),
    )


# --- 2. SGLang: one of eight TP-2 pods at the default memory fraction, pool full, queue ---------------------------


def sglang_default_mem_fraction_early_saturation() -> FieldState:
    """llm-d/llm-d#1840 ("[SGLang]: Increase the memory used for KV cache and update benchmark results in optimized
    baseline", merged): "Earlier, benchmarks for SGLang were using mem-fraction-static to be default (~82%) which was
    causing early saturation for sglang deployment with the same benchmark. The --mem-fraction-static parameter …
    controls the portion of available GPU memory dedicated to the static memory pool, which primarily hosts the KV
    cache. In this change, the mem-fraction-static is bumped up to 90%. vLLM deployments use 95% as the limit but
    SGLang deployment at 95% fails with out of memory errors while loading CUDA kernels … I think 90% is a safe spot
    upon trying different numbers as above 92%, I started seeing OOM errors." The benchmark (the PR's
    ``guides/optimized-baseline/benchmark-results/sglang-qwen3-32b-h100``): "16 × H100 GPUs, distributed across 8
    SGLang model servers (2 H100s per server with TP=2), serving Qwen/Qwen3-32B … 6,000-token shared system prompt +
    1,200-token question, 1,000-token output, rate ladder 3 → 60"; at 0.90 the routed arm serves ~14,500 output
    tokens/s at rates 40–60 with TTFT p90 under 0.5 s. The engine fact (SGLang ``server_args.py``): the default
    fraction is computed from the card's memory (0.828 for Qwen3-32B on H100, sgl-project/sglang#29092).

    Arithmetic: per H100, Qwen3-32B's bf16 weights at TP 2 take ~30.5 GiB; 0.82 of ~79 GiB leaves ~34.5 GiB of
    pool, 0.90 leaves ~40.7 GiB: +18 % KV at 128 KiB a token per GPU (64 layers × 4 KV heads × 128 × 2 × 2 bytes),
    ~282,000 → ~333,000 tokens. At the saturating rate a pod holds ~10 prefix groups (60,000 tokens) and 160 running
    requests of ~1,400 unique tokens each (224,000): 284,000 of 286,720 (99 %), 40 more waiting. Another ~47,000
    tokens hold the 40 waiting (40 × 1,400 = 56,000 at the margin). The fix the PR merged is the memory fraction:
    propose it raised, and no higher than 0.92 (the OOM the PR measured above it). Never a KV byte budget (SGLang has
    none), never more running requests (the pool, not the count, is full), never replicas on one second of history,
    never a restart (it serves).

    Chosen: the PR gives no per-pod gauges; one pod at rate 40 of the ladder (5 requests a second to it), before the
    change: 160 running, 40 queued, token usage 0.99, ~360 output tokens a request (the routed arm's 14,463 output
    tokens/s ÷ 40 requests/s) at ~48 ms, TTFT ~9 s from the queue (prefill ~0.6 s). The pool rendered at 286,720
    tokens (0.828, the default for this pairing); ``mem_fraction_static`` 0.82 configured (the report's "~82%").
    SGLang of June 2026 rendered with the 0.5.x exposition. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    pool = 286_720
    eng = SGLangEngine(model_name="Qwen/Qwen3-32B", max_total_num_tokens=pool, context_len=40_960, swa_tokens=0)

    def gauges(running: float, queue: float, used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queue
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 1_800.0
        eng.g["cache_hit_rate"] = 0.8

    eng.finish(1_500, prompt=7_200, output=360, ttft=9.0, tpot=0.048, queue=8.4)
    eng.prompt["true"] = 1_660 * 1_200.0  # the 6,000 shared tokens are cached on the pod and not prefilled again
    eng.generation["true"] = 1_500 * 360.0 + 160 * 180.0
    eng.itl.observe(0.048, 1_500 * 359 + 160 * 180)
    gauges(160.0, 40.0, 284_000.0)
    first = eng.render()
    eng.finish(5, prompt=7_200, output=360, ttft=10.5, tpot=0.048, queue=9.9)
    eng.prompt["true"] += 5 * 1_200.0
    eng.generation["true"] += 1_800.0
    eng.itl.observe(0.048, 1_800)
    gauges(160.0, 40.0, 284_200.0)
    return FieldState(
        id="sglang-qwen3-32b-tp2-default-mem-fraction-early-saturation",
        source="https://github.com/llm-d/llm-d/pull/1840",
        engine_version="SGLang of June 2026 (0.5.x exposition)",
        deployment={
            "name": "qwen3-32b-sglang-pod",
            "engine": "sglang",
            "model": "Qwen/Qwen3-32B",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "mem_fraction_static": 0.82,
            "max_model_len": 40_960,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 160, "requests_waiting": 40, "kv_cache_capacity_tokens": pool},
        must_propose=[("gpu_memory_utilization", "increase")],
        must_never=[
            ("kv_cache_memory_bytes", None),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(
            _suggests("gpu_memory_utilization", "increase", at_least=0.83, at_most=0.92), no_stall_claimed
        ),
    )


# --- 3. vLLM 0.18: 18 × 80k requests sized to 97 % of the pool, preempted as they decode --------------------------

_CONCURRENCY_OR_POOL: list[tuple[str, str | None]] = [
    ("max_num_seqs", "decrease"),
    ("kv_cache_dtype", None),
    ("gpu_memory_utilization", "increase"),
    ("weight_quantization", None),
    ("tensor_parallel_size", "increase"),
]


def _cuts_concurrency_or_grows_pool(result: dict[str, Any]) -> None:
    """At least one turn to fewer concurrent sequences (at most 17, the requests the pool holds with room) or to a
    larger pool is proposed — the two the thread's answer names."""
    recs = list(result.get("recommendations") or [])
    hits = [c for advice in _CONCURRENCY_OR_POOL for c in matching(recs, advice)]
    assert hits, f"neither fewer sequences nor a larger pool proposed; got {brief(recs)}"
    for c in matching(recs, ("max_num_seqs", "decrease")):
        assert 1 <= number(c.get("suggested")) <= 17, f"max_num_seqs {c.get('current')} → {c.get('suggested')}"


def vllm_018_18x80k_sized_to_pool_preempts() -> FieldState:
    """discuss.vllm.ai "Vllm-0.18.0 kv cache使用率从100%掉到0%" (vLLM 0.18.0: KV-cache usage drops from 100 % to 0 %):
    ``vllm serve Qwen3.5-9B … --max-num-batched-tokens=64K --max-num-seqs 128 … --no-enable-prefix-caching``;
    "Available KV cache memory: 45.94 GiB; Maximum concurrency for 262,144 tokens per request: 5.70x"; the load:
    ``vllm bench serve … --request-rate 18 --max-concurrency 18 --num-prompts 60 --input-len 80000 --output-len
    800``;
    "按80K的输入来算,大概刚好能同时容纳18个请求使kv cache利用率最高"
    (at 80K of input the pool holds just about 18 requests at once, the highest KV utilisation);
    "这段时间 kv cache 使用率从100%掉到0%,running 队列请求全部变成waiting ... 但是TFLOPS和memory write还有"
    (in this period KV usage fell from 100 % to 0 %, the running requests all
    became waiting, yet TFLOPS and memory writes went on). The answer: "When vLLM's KV cache reaches 100%
    utilization, new requests are moved from the running to the waiting queue … This is expected behavior: vLLM
    preempts or blocks new requests when there isn't enough KV cache space … If this happens frequently, consider
    lowering max-num-seqs or max-num-batched-tokens, or increasing available GPU memory or parallelism".

    Arithmetic: the pool is 5.70 × 262,144 ≈ 1,494,000 tokens; 18 requests of 80,000 + 800 need 1,454,400 (97.3 %)
    at their last token, before the hybrid model's per-request state and page rounding. V1 admits each on its prompt
    (18 × 80,000 = 96.4 %), decode grows each by 800, the pool fills, and the scheduler preempts by recompute — the
    newest running request, whose 80,000 tokens must be prefilled again (the TFLOPS the reporter saw with nothing
    generated). The storm is the load sized at the pool, working as intended: the remedies are fewer concurrent
    sequences (≤ 17: 17 × 80,800 = 1,373,600, 92 %) or a larger pool, the two the answer names — one of them must be
    proposed. Never more sequences (128 is not what admits 18; more in flight only preempts more), never a larger
    step budget (64K already; the answer's direction is down), never replicas on one second of history, never a
    restart (it recovers by itself: tokens move), never a context cap below the 80,800-token requests.

    Chosen: Qwen3.5-9B (a hybrid Gated-DeltaNet model with a 262,144-token context) is not in the advisor's tables;
    Llama-3.1-8B-Instruct (a dense 8B in bf16, 131,072-token context) stands in, with the report's pool rendered
    (93,389 blocks of 16 = 1,494,224 tokens; ``cache_config_info`` marks the hybrid groups with ``mamba_block_size``)
    and ``max_model_len`` 131,072 (the report's 262,144 exceeds the stand-in's). The GPU is not named: 45.94 GiB of
    pool beside ~18 GiB of weights at the default 0.9 is an 80 GB card (H100-SXM). Before: 30 of the 60 prompts
    served (800 tokens out at ~25 ms), 12 preemptions in earlier rounds. Scrape #1: 18 running, KV 99.2 %. The
    window: the newest request preempted (its ~80,500 tokens freed: 5.4 % of the pool), the other 17 decode 40 steps;
    KV 99.2 → 94.2 %, 17 running, 1 waiting. vLLM 0.18.0 rendered with the 0.33 label set. SLO: TTFT 5 s, TPOT
    0.1 s.
    """
    eng = VLLMEngine(
        model_name="default_model",
        num_gpu_blocks=93_389,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.cache_labels.update(enable_prefix_caching="False", mamba_block_size="528")
    eng.finish(30, prompt=80_000, output=800, ttft=14.0, tpot=0.025, queue=8.0)
    eng.first_tokens([14.0] * 30 + [20.0] * 18)
    eng.prefill(48 * 80_000 + 12 * 80_000)
    eng.decode(30 * 800 + 18 * 700, 0.025)
    eng.preempt(12)
    eng.running, eng.waiting, eng.kv_usage = 18.0, 0.0, 0.992
    first = eng.render()
    eng.preempt(1)
    eng.decode(17 * 40, 0.025, steps=40, batch=17)
    eng.running, eng.waiting, eng.kv_usage = 17.0, 1.0, 0.942
    return FieldState(
        id="vllm-0.18-qwen35-9b-18x80k-sized-to-pool-preempts",
        source="https://discuss.vllm.ai/t/vllm-0-18-0-kv-cache-100-0/2608",
        engine_version="vLLM 0.18.0 (rendered with the 0.33 label set)",
        deployment={
            "name": "qwen35-9b-80k-bench",
            "engine": "vllm",
            "engine_version": "0.18.0",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "served_model": "default_model",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131_072,
            "max_num_seqs": 128,
            "max_num_batched_tokens": 65_536,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 17, "requests_waiting": 1, "kv_cache_capacity_tokens": 1_494_224},
        must_never=[
            ("max_num_seqs", "increase"),
            ("max_num_batched_tokens", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_cuts_concurrency_or_grows_pool, _cap_at_least(80_800), no_stall_claimed),
    )


STATES = [
    vllm_gemma4_swa_prefix_reuse_collapse(),
    sglang_default_mem_fraction_early_saturation(),
    vllm_018_18x80k_sized_to_pool_preempts(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
