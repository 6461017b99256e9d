"""Field states, round 78: three vLLM pages where a queue or a full pool must not be read as the wrong shortage — a
1,000-prompt throughput benchmark whose preempted requests re-prefilled their own tokens and were counted as a 32.2 %
prefix-cache hit rate on random prompts (vLLM of September 2025), an agent recipe whose 1,000,000-token
``max_model_len`` lets two sessions hold a 1,526,178-token pool while two of four sequence slots idle, and a ShareGPT
benchmark offered at 12 requests/s to a Qwen2-72B-GPTQ server that answered 5.80 a second (vLLM 0.5.3.post1) — from
three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1 of 2025 and
V0 0.5 with the 0.11 label set, as rounds 61–76 render them; the 2026 recipe with the 0.33 label set, which carries
``num_requests_waiting_by_reason`` and ``kv_cache_size_tokens``). The assertions come from the reports' numbers and
the verdict each thread establishes, never from the advisor's output:

* ``vllm-0.10-llama3.1-8b-1000-prompt-burst-preempted-recompute-counted-as-32pct-prefix-hits`` — vllm-project/vllm
  #25780 ("vLLM counts re-computation tokens as prefix match", September 2025, fixed by the merged #25787): ``vllm
  bench throughput`` of Hermes-3-Llama-3.1-8B, 1,000 random prompts of 1,024 in / 1,024 out: "Running: 259 reqs,
  Waiting: 535 reqs, GPU KV cache usage: 82.3%, Prefix cache hit rate: 32.2%" — the hits are preempted requests
  recomputing their own tokens (after the fix the same run reads 0.2 %). A one-shot burst under preemption: never
  replicas, more sequences, a prefix-cache turn or a restart.
* ``vllm-2026-agent-recipe-max-model-len-1m-pool-1.53-requests-capacity-queue-2-of-4-seqs`` — MiaAI-Lab/GLM-5.3-
  Flash-EXL3-2x-DGX-Sparks#43 ("Capacity queueing below MAX_NUM_SEQS=4 at 1M context", August 2026):
  ``num_requests_running=2``, ``num_requests_waiting=1`` with ``reason="capacity"``, ``kv_cache_size_tokens``
  1,526,178, ``kv_cache_max_concurrency`` 1.53 — "The queue reason is ``capacity`` (KV pool), not the seq slot
  count". Never more sequences, replicas or a restart.
* ``vllm-0.5.3-h100-qwen2-72b-gptq-sharegpt-12-rps-offered-5.8-served-finite-burst`` — vllm-project/vllm#6781
  ("Slow TTFT(?) for Qwen2-72B-GPTQ-Int4 on H100 *2", July 2024): ``--request-rate 12 --num_prompts=1000``, "Request
  throughput (req/s): 5.80", "Benchmark duration (s): 172.44", "Mean TTFT (ms): 18799.19", "P99 TTFT (ms):
  54378.33". The TTFT is the backlog of a finite benchmark offered twice what the server answers. Never replicas
  or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.

Candidates set aside (within the round's time limit): NVIDIA/TensorRT-LLM#9470 (``trtllm-serve --max_batch_size=1``,
TTFT lower for longer inputs — the measured TTFTs were not returned), #1012 (int8 KV on 2 × T4 — figures not
returned), #6294 (Llama-3.1-8B FP8 throughput not reproduced on H100 — no resolution returned), #2456 (KV reuse on
Mistral-7B at TP 8 — ``gptManagerBenchmark``, not a served page), triton-inference-server/tensorrtllm_backend#293
(Triton 43.65 against native 1,421.18 tokens/s for Llama-2-70B at TP 4 — no resolution returned), #378 and #667
(in-flight batching questions — no figures or verdict returned), huggingface/text-generation-inference#1982 (memory
"3x higher" — TGI's by-design KV preallocation, the shape of round 4's ``tgi-llama31-8b-4xl40s-idle-at-night``),
vllm-project/vllm#9722, #13412 (concurrency and TTFT questions — no model, GPU or verdict returned), #8804 (a
multi-step PR's benchmark log — the shape of round 3's benchmark ramp), sgl-project/sglang#5031 (8k-token MLA prefill
of 90 s — the fix not returned), #6860 (PD decode reservation — a disaggregated deployment), unslothai/unsloth#9392
(unified-KV overcommit — the shape of rounds 3, 12b and 42); vllm-project/vllm#18115, #44594, #37307,
sgl-project/sglang#26248, #14972, #1947, #1030, lemonade-sdk/lemonade#3276, ggml-org/llama.cpp#23652, #10860, #10054,
triton-inference-server/server#7316, #7548, #7676, huggingface/text-generation-inference#1221, #2635, #1831, #2007,
#922 — already rows (or set aside) in earlier rounds.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed

# --- 1. vLLM of September 2025, Llama-3.1-8B: a 1,000-prompt burst, preempted recompute counted as prefix hits ------


def vllm_burst_preempted_recompute_counted_as_prefix_hits() -> FieldState:
    """vllm-project/vllm#25780 ("[Bug]: vLLM counts re-computation tokens as prefix match", zhuohan123, 2025-09-26,
    labelled bug): "I got a 30% prefix cache hit rate when profiling throughput on random dataset: ``$ vllm bench
    throughput --model NousResearch/Hermes-3-Llama-3.1-8B --dataset-name random --num-prompts 1000 --input-len 1024
    --output-len 1024`` … ``Engine 000: Avg prompt throughput: 6102.8 tokens/s, Avg generation throughput: 1221.7
    tokens/s, Running: 259 reqs, Waiting: 535 reqs, GPU KV cache usage: 82.3%, Prefix cache hit rate: 32.2%``"; "The
    reason is that if requests are preempted and recomputed, these count in prefix cache hit rate." The fix,
    vllm-project/vllm#25787 ("[Core] Don't count preempted tokens in prefix cache hit rate", merged): the same command
    then logs "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 7097.7 tokens/s, Running: 260 reqs,
    Waiting: 475 reqs, GPU KV cache usage: 100.0%, Prefix cache hit rate: 0.2%" — "``Prefix cache hit rate`` droped
    from 30% to 0.2%".

    The verdict the thread establishes: random prompts share no prefix; the 32.2 % is the engine re-prefilling the
    tokens of requests it preempted for want of KV blocks and finding them in its own cache (0.2 % once they are not
    counted). So the page is a pool under preemption (82.3 → 100 % used, requests evicted and resumed), fed by a
    one-shot benchmark: all 1,000 requests arrive at once and the run ends when they are answered (1,000 × 1,024 output
    tokens at the ~7,100 tokens/s the fixed run logs: ~144 s). Must never: replicas (a one-shot burst that drains by
    itself; one second of history); more sequences (``max_num_seqs`` increase: the pool, not the 1,024 cap, holds the
    259 running — more admissions are more preemptions); any prefix-cache turn (the cache is on, the prompts share
    nothing, and the hits it reports are recompute, not reuse); a restart (tokens flow).

    Not asserted: a pool-growing turn (plausible under preemption; the thread measured none), a lower sequence cap.

    Chosen where the report is silent: the model — ``meta-llama/Llama-3.1-8B-Instruct`` (Hermes-3-Llama-3.1-8B is its
    fine-tune: the same geometry); the GPU — one ``h100-sxm`` (not stated); ``vllm bench throughput``'s defaults for the
    LLM class on an 80 GB Hopper: ``gpu_memory_utilization`` 0.9, ``max_model_len`` 131,072 (the model's),
    ``max_num_seqs`` 1,024, ``max_num_batched_tokens`` 16,384, prefix caching on; the pool 28,000 blocks of 16 (448,000
    tokens: 71.6 GiB less 15 GiB of bf16 weights and activations at 128 KiB a token — 32 layers × 8 KV heads × 128 × 2
    × 2 B; an input), so 82.3 % is ~1,420 tokens for each of the 259; the moment ~40 s in: 206 answered (TTFT ~12 s:
    queued behind the burst), 80 preemptions so far; the window: 6,102 prompt tokens scheduled of which 1,965 (32.2 %)
    are found in the cache, 1,222 tokens generated across the running requests (~0.21 s a token each), 2 preemptions,
    one answered and one admitted. vLLM of September 2025 (``engine_version`` 0.10.2) rendered with the 0.11 label set.
    SLO: TTFT 30 s (a throughput benchmark's), TPOT 0.1 s.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 28_000
    pool = blocks * 16
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        started=time.time() - 600.0,
    )
    eng.finish(206, prompt=1_024, output=1_024, ttft=12.0, tpot=0.03, queue=11.0, reason="length", max_tokens=1_024)
    eng.first_tokens([12.0] * 465)
    eng.prefill(465 * 1_024 + 80 * 1_200, cached=80 * 1_200)
    generated = 206 * 1_024 + 259 * 400
    eng.decode(generated, 0.03, steps=generated / 240, batch=240)
    eng.preempt(80)
    eng.running, eng.waiting, eng.kv_usage = 259.0, 535.0, 0.823
    first = eng.render()
    eng.finish(1, prompt=1_024, output=1_024, ttft=12.0, tpot=0.21, queue=11.0, reason="length", max_tokens=1_024)
    eng.first_tokens([30.0])
    eng.prefill(6_102, cached=1_965)
    eng.decode(1_222, 0.21, steps=5, batch=244)
    eng.preempt(2)
    eng.kv_usage = 0.83
    return FieldState(
        id="vllm-0.10-llama3.1-8b-1000-prompt-burst-preempted-recompute-counted-as-32pct-prefix-hits",
        source="https://github.com/vllm-project/vllm/issues/25780",
        engine_version="vLLM of September 2025 (V1, 0.10.2) rendered with the 0.11 label set",
        deployment={
            "name": "hermes3-llama31-8b-bench-throughput",
            "engine": "vllm",
            "engine_version": "0.10.2",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131_072,
            "max_num_seqs": 1_024,
            "max_num_batched_tokens": 16_384,
            "enable_prefix_caching": True,
            "slo": {"ttft_seconds": 30.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 259, "requests_waiting": 535, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            ("prefix_caching", None),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. vLLM of August 2026, an agent recipe at max_model_len 1,000,000: two sessions fill a 1.53-request pool -------


def vllm_max_model_len_1m_pool_capacity_queue() -> FieldState:
    """MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#43 ("Capacity queueing below MAX_NUM_SEQS=4 at 1M context — suggest
    200K default or docs note", ChrisLou-bioinfo, 2026-08-30, closed): "With the default recipe
    (``MAX_MODEL_LEN=1000000``, ``MAX_NUM_SEQS=4``), interactive multi-client traffic queues even when only 1–2 requests
    are running. The queue reason is ``capacity`` (KV pool), not the seq slot count"; "Live metrics:
    ``num_requests_running=2``, ``num_requests_waiting=1`` with
    ``num_requests_waiting_by_reason{reason="capacity"}=1``";
    "``cache_config_info``: ``kv_cache_size_tokens=1,526,178``, ``kv_cache_max_concurrency=1.53`` — i.e. the whole pool
    fits ~1.5 full-length (1M) requests"; "So a single long-context request (a few hundred K tokens) blocks the next
    admission even with 3 free seq slots"; "``max_num_seqs`` and ``max_model_len`` being ceilings rather than
    reservations is documented in the README, but the practical consequence for interactive use — '4 slots but 1.5
    effective' — is easy to miss".

    The verdict the report's numbers establish: the waiting request waits for KV blocks, not for a sequence slot
    (``reason="capacity"``, two of four slots free); a pool of 1,526,178 tokens holds 1.53 requests of the 1,000,000
    the recipe allows, so two long agent sessions hold it. Must never: more sequences (``max_num_seqs`` increase: the
    cap is not what holds the queue, and a fifth slot adds a claimant on the same full pool); replicas (one second of
    history); a restart (tokens flow).

    Not asserted: ``max_model_len`` (the reporter suggests 200,000 as an interactive default, unmeasured; it would
    refuse the few-hundred-K-token sessions this page serves), a pool-growing turn (not measured), fewer sequences.

    Chosen where the report is silent, or where the recipe is not in the advisor's tables (GLM-5.3-Flash in EXL3 on two
    DGX Spark GB10s): the model — ``mistralai/Mistral-Nemo-Instruct-2407`` (a 1,024,000-token context, so the recipe's
    ``max_model_len`` 1,000,000 stands; 160 KiB a token — 40 layers × 8 KV heads × 128 × 2 × 2 B) on two ``h200`` at TP
    2 with ``gpu_memory_utilization`` 0.95 (2 × 0.95 × 139.8 GiB less 22.8 GiB of bf16 weights and activations holds
    the report's pool at 160 KiB a token); the pool rendered as 95,386 blocks of 16 (1,526,176 tokens; the report's
    1,526,178); the two sessions' contexts, ~820,000 and ~683,000 tokens (98.5 % of the pool, so the waiting request's
    first chunk finds no free block); the history — 120 agent turns answered (prompts ~300,000 tokens, ~1,500 out, TTFT
    ~60 s at prefill), no preemption; the window: the two sessions decode 40 tokens at ~50 ms a token, nothing
    finishes, nothing is admitted. vLLM of August 2026 (the recipe's image) rendered with the 0.33 label set. SLO: TTFT
    120 s (agent turns of hundreds of K tokens), TPOT 0.1 s.
    """
    blocks = 95_386
    pool = blocks * 16
    eng = VLLMEngine(
        model_name="glm-5.3-flash",
        num_gpu_blocks=blocks,
        max_model_len=1_000_000,
        gpu_memory_utilization=0.95,
        version="0.33",
        started=time.time() - 7_200.0,
    )
    eng.finish(120, prompt=300_000, output=1_500, ttft=60.0, tpot=0.05, queue=5.0, max_tokens=32_768)
    eng.first_tokens([60.0] * 122)
    eng.prefill(122 * 300_000, cached=122 * 200_000)
    eng.decode(120 * 1_500 + 2 * 800, 0.05, steps=(120 * 1_500 + 1_600) / 1.5, batch=1.5)
    eng.running, eng.waiting, eng.deferred, eng.kv_usage = 2.0, 1.0, 0.0, 0.985
    first = eng.render()
    eng.decode(40, 0.05, steps=20, batch=2)
    eng.kv_usage = 0.98503
    return FieldState(
        id="vllm-2026-agent-recipe-max-model-len-1m-pool-1.53-requests-capacity-queue-2-of-4-seqs",
        source="https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/issues/43",
        engine_version="vLLM of August 2026 (the recipe's image; rendered with the 0.33 label set)",
        deployment={
            "name": "glm53-flash-spark-1m-context",
            "engine": "vllm",
            "model": "mistralai/Mistral-Nemo-Instruct-2407",
            "served_model": "glm-5.3-flash",
            "gpu": "h200",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.95,
            "max_model_len": 1_000_000,
            "max_num_seqs": 4,
            "slo": {"ttft_seconds": 120.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 2, "requests_waiting": 1, "kv_cache_capacity_tokens": pool},
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 3. vLLM 0.5.3.post1, Qwen2-72B-GPTQ on one H100: ShareGPT offered at 12/s, answered at 5.80/s ------------------


def vllm_053_qwen2_72b_gptq_sharegpt_finite_burst() -> FieldState:
    """vllm-project/vllm#6781 ("[Performance]: Slow TTFT(?) for Qwen2-72B-GPTQ-Int4 on H100 *2", cyc00518, 2024-07-25,
    closed stale, labelled performance): "I did some tests in order to find better parameter to speed up, and it
    appears that there hasn't been a significant change in TTFT … Is my TTFT correct?"; "``H100 *2, vllm =
    0.5.3post1``"; "``python benchmark_serving.py --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json
    --dataset-name sharegpt --backend vllm --model Qwen2-72B-Int4 --request-rate 12 --num_prompts=1000``"; the first
    set: "``python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2-72B-Instruct-GPTQ-Int4
    --disable-log-requests --dtype auto --quantization marlin --max-model-len 8000``": "Successful requests: 1000;
    Benchmark duration (s): 172.44; Total input tokens: 217393; Total generated tokens: 193576; Request throughput
    (req/s): 5.80; Input token throughput (tok/s): 1260.72; Output token throughput (tok/s): 1122.60; Mean TTFT (ms):
    18799.19; Median TTFT (ms): 12578.35; P99 TTFT (ms): 54378.33".

    The verdict the report's own numbers establish: 1,000 prompts offered at 12 a second all arrive within ~83 s; the
    server answered 5.80 a second, so the backlog grows for the offered minute and a half and drains by 172 s, when
    the run ends. The 18.8 s mean TTFT (12.6 s median, 54.4 s at p99) is that backlog's wait: a finite benchmark
    offered twice what one server answers, not a sustained load — nothing arrives after the thousandth prompt. Engine
    arithmetic: 1,122.6 tokens/s over the 256 sequences V0 runs at once is ~228 ms a token, and 194 generated tokens a
    request at that pace is ~44 s a request: 256 ÷ 44 s = 5.8 a second (Little's law), the measured rate. Must never:
    replicas (the queue empties when the benchmark does; one second of history); a restart (tokens flow).

    Not asserted: a larger sequence cap or pool (the thread tried parameters without a measured gain it reports), the
    TTFT itself (a benchmark's backlog).

    Chosen where the report is silent: the model — ``Qwen/Qwen2.5-72B-Instruct`` with ``quantization`` ``gptq`` (the
    tables' 72B Qwen2 geometry: 80 layers × 8 KV heads × 128 — 320 KiB a token; Qwen2-72B's is the same); the GPU — one
    ``h100-sxm`` (the report's server command sets no ``--tensor-parallel-size``: one of the two H100s serves);
    ``gpu_memory_utilization`` 0.9 and ``max_num_seqs`` 256 (V0's defaults); the pool 5,900 blocks of 16 (94,400
    tokens: 71.3 GiB less ~39.5 GiB of 4-bit weights with fp16 embeddings and ~3 GiB of activations; an input);
    ShareGPT's means — 217 prompt and 194 generated tokens a request; the moment ~60 s in: 720 arrived, 300 answered,
    256 running (~314 tokens each: 85 % of the pool), 164 waiting; the window: 6 answered (5.8 a second), 12 arrived,
    6 admitted and prefilled, 1,123 tokens generated. vLLM 0.5.3.post1 (V0, July 2024) rendered with the 0.11 label
    set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen2.5-72B-Instruct"
    blocks = 5_900
    pool = blocks * 16
    tpot, prompt, output = 256 / 1_122.6, 217, 194
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=8_000,
        gpu_memory_utilization=0.9,
        started=time.time() - 900.0,
    )
    eng.finish(300, prompt=prompt, output=output, ttft=12.6, tpot=tpot, queue=12.0, max_tokens=output)
    eng.first_tokens([12.6] * 556)
    eng.prefill(556 * prompt)
    generated = 300 * output + 256 * 97
    eng.decode(generated, tpot, steps=generated / 256, batch=256)
    eng.running, eng.waiting, eng.kv_usage = 256.0, 164.0, 256 * 314 / pool
    first = eng.render()
    eng.finish(6, prompt=prompt, output=output, ttft=25.0, tpot=tpot, queue=24.0, max_tokens=output)
    eng.first_tokens([25.0] * 6)
    eng.prefill(6 * prompt)
    eng.decode(1_123, tpot, steps=4.4, batch=256)
    eng.waiting, eng.kv_usage = 170.0, 256 * 315 / pool
    return FieldState(
        id="vllm-0.5.3-h100-qwen2-72b-gptq-sharegpt-12-rps-offered-5.8-served-finite-burst",
        source="https://github.com/vllm-project/vllm/issues/6781",
        engine_version="vLLM 0.5.3.post1 (V0, July 2024) rendered with the V1 0.11 label set",
        deployment={
            "name": "qwen2-72b-gptq-h100",
            "engine": "vllm",
            "engine_version": "0.5.3",
            "model": model,
            "quantization": "gptq",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_000,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 256, "requests_waiting": 170, "kv_cache_capacity_tokens": pool},
        must_never=[("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_burst_preempted_recompute_counted_as_prefix_hits(),
    vllm_max_model_len_1m_pool_capacity_queue(),
    vllm_053_qwen2_72b_gptq_sharegpt_finite_burst(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
